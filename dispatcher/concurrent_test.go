package dispatcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// TestConcurrent runs the dispatcher under real goroutines (run it with
// -race): one main fetcher dispatching a log, and per target a goroutine
// that plays connection manager, sender and target at once - it returns,
// starts a recovery fetcher goroutine, takes batches, applies them
// (checking order), acks, asks for progress markers, and now and then
// crashes (its in-flight batch is lost) or is cut off as slow. Once the
// main stream is done and the crash budget spent, every target must have
// applied exactly its messages.
func TestConcurrent(t *testing.T) {
	const (
		nTxns    = 2000
		nTargets = 4
		crashes  = 6 // per target
		deadline = 60 * time.Second
	)
	rng := rand.New(rand.NewPCG(1, 2))
	topics := []string{"a", "b", "c", "d", "e"}
	var log []*logstorepb.Transaction
	for l := 1; l <= nTxns; l++ {
		log = append(log, txn(types.LSN(l), topics[rng.IntN(len(topics))], topics[rng.IntN(len(topics))]))
	}
	ids := make([]string, nTargets)
	subs := make([][]string, nTargets)
	for i := range ids {
		ids[i] = fmt.Sprintf("t%d", i)
		subs[i] = []string{topics[i], topics[(i+1)%len(topics)]}
	}
	m := newModel(log, ids, subs)
	d := New(Config{Queue: targetqueue.Config{MaxCount: 16}}, 0)
	for i, id := range ids {
		if err := d.AddTarget(id, subs[i]); err != nil {
			t.Fatal(err)
		}
	}

	var slowMu sync.Mutex
	slow := map[string]bool{} // cut off by Dispatch: the target must reconnect
	var mainDone atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, nTargets+1)
	start := time.Now()

	wg.Go(func() {
		for _, tx := range log {
			_, s := d.Dispatch(tx, 0)
			slowMu.Lock()
			for _, id := range s {
				slow[id] = true
			}
			slowMu.Unlock()
			runtime.Gosched()
		}
		mainDone.Store(true)
	})

	for ti, id := range ids {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ti), 3))
			var applied types.LSN
			var fetchers sync.WaitGroup
			defer fetchers.Wait()
			left := crashes
			for {
				if time.Since(start) > deadline {
					errs <- fmt.Errorf("%s: not done after %v, applied %d, missing %d", id, deadline, applied, m.next[ti][applied])
					return
				}
				r, err := d.Return(id, applied)
				if err != nil {
					errs <- err
					return
				}
				if !r.Empty {
					fetchers.Go(func() {
						for l := m.nextFor(ti, r.From, r.To); l <= r.To; {
							switch d.PushCatchup(id, r.Term, log[l-1], 0) {
							case targetqueue.Pushed:
								l = m.nextFor(ti, l, r.To)
							case targetqueue.Overflow:
								runtime.Gosched() // the sender makes room
							default:
								return // stale or suspended: stop
							}
						}
						d.FetchingCompleted(id, r.Term)
					})
				}
			stream:
				for {
					slowMu.Lock()
					cut := slow[id]
					delete(slow, id)
					slowMu.Unlock()
					switch {
					case cut:
						break stream
					case left > 0 && rng.IntN(200) == 0:
						left--
						d.Suspend(id) // crash: whatever is in flight is lost
						break stream
					}
					msgs, ok := d.NextBatchForTerm(id, r.Term, 1+rng.IntN(8), 1<<20)
					if !ok {
						errs <- fmt.Errorf("%s: term %d is not current", id, r.Term)
						return
					}
					if len(msgs) == 0 {
						if mainDone.Load() && left == 0 && m.next[ti][applied] == 0 && applied == nTxns {
							return
						}
						d.Progress(id, 0)
						runtime.Gosched()
						continue
					}
					for _, msg := range msgs {
						next := m.next[ti][applied]
						if msg.LSN <= applied || (!msg.IsProgress() && msg.LSN != next) || (msg.IsProgress() && next != 0 && next <= msg.LSN) {
							errs <- fmt.Errorf("%s: got %d (progress %t) after %d, next is %d", id, msg.LSN, msg.IsProgress(), applied, next)
							return
						}
						applied = msg.LSN
					}
					if err := d.AckTerm(id, r.Term, applied); err != nil && !errors.Is(err, ErrStaleTerm) {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		s, _ := d.Stats(id)
		t.Logf("%s: %+v", id, s)
		if s.LastAck != nTxns {
			t.Errorf("%s: last ack %d, want %d", id, s.LastAck, nTxns)
		}
	}
}
