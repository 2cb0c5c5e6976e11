package targetqueue

import (
	"testing"

	"github.com/logplayer/logplayer/types"
)

// TestFIFOCompaction pushes and pops far more messages than compactAfter
// through one queue, interleaved, and checks order and byte accounting.
func TestFIFOCompaction(t *testing.T) {
	q := New(Config{MaxCount: 3 * compactAfter, MaxBytes: 1 << 40})
	term := q.Return()
	q.FetchingCompleted(term)
	next, want := types.LSN(1), types.LSN(1)
	for round := range 50 {
		for range 2*compactAfter + round {
			if res := q.Push(Msg{LSN: next, Bytes: int64(next)}, true, term); res != Pushed {
				if res != Overflow {
					t.Fatalf("push %d: %s", next, res)
				}
				break
			}
			next++
		}
		for range compactAfter + 3*round {
			m, ok := q.Front()
			if !ok {
				break
			}
			if m.LSN != want {
				t.Fatalf("front %d, want %d", m.LSN, want)
			}
			q.Pop()
			want++
		}
		n, _ := q.Len()
		nb, _ := q.Bytes()
		var sum int64
		for l := want; l < next; l++ {
			sum += int64(l)
		}
		if n != int(next-want) || nb != sum {
			t.Fatalf("round %d: len %d bytes %d, want %d and %d", round, n, nb, next-want, sum)
		}
		if len(q.normal.msgs) > 3*compactAfter+compactAfter {
			t.Fatalf("round %d: backing slice grew to %d", round, len(q.normal.msgs))
		}
	}
}

// TestClone checks that a clone and its original evolve independently.
func TestClone(t *testing.T) {
	q := New(Config{})
	term := q.Return()
	q.Push(Msg{LSN: 1}, false, term)
	q.Push(Msg{LSN: 5}, true, term)
	before := q.String()
	c := q.Clone()
	if c.String() != before {
		t.Fatalf("clone %s, want %s", c, before)
	}
	c.FetchingCompleted(term)
	c.NextBatch(10, 100)
	c.Push(Msg{LSN: 6}, true, term)
	if q.String() != before {
		t.Fatalf("original changed by its clone: %s, want %s", q, before)
	}
	if got, want := c.String(), "term=2 state=N normal=[6p] catchup=[] inflight=[1p 5p] last=6/1/5"; got != want {
		t.Fatalf("clone %s, want %s", got, want)
	}
}

func TestStrings(t *testing.T) {
	for s, want := range map[State]string{Normal: "N", RecoveryFetching: "RF", FetchingCompleted: "FC", Suspended: "S", 9: "State(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
	for r, want := range map[PushResult]string{Pushed: "Pushed", DroppedStale: "DroppedStale", DroppedSuspended: "DroppedSuspended", Overflow: "Overflow", 9: "PushResult(9)"} {
		if r.String() != want {
			t.Errorf("%d: %q, want %q", r, r.String(), want)
		}
	}
}
