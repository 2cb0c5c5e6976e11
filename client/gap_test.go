package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// gate is a server interceptor that holds the Append of one sequence of
// one producer epoch (unrun) until release is closed, then runs it (refuse
// nil) or refuses it with refuse (never run: nothing written). With lose,
// it answers the epoch's later sequences UNAVAILABLE (unrun) until
// release. seen gets each sequence the server is first sent.
type gate struct {
	epoch   atomic.Uint64
	seq     uint64
	refuse  error
	lose    bool
	release chan struct{}
	mu      sync.Mutex
	seen    map[uint64]chan struct{}
}

func (g *gate) saw(seq uint64) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := g.seen[seq]
	if ch == nil {
		ch = make(chan struct{})
		g.seen[seq] = ch
	}
	return ch
}

func (g *gate) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r, ok := req.(*logstorepb.AppendRequest)
	if !ok {
		return handler(ctx, req)
	}
	ch := g.saw(r.Sequence)
	select {
	case <-ch:
	default:
		close(ch)
	}
	if r.ProducerEpoch != g.epoch.Load() || r.Sequence < g.seq {
		return handler(ctx, req)
	}
	if r.Sequence > g.seq {
		select {
		case <-g.release:
		default:
			if g.lose {
				return nil, status.Error(codes.Unavailable, "test: request lost")
			}
		}
		return handler(ctx, req)
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.refuse != nil {
		return nil, g.refuse
	}
	return handler(ctx, req)
}

// TestGapBehindUnsettledSequence: sequence 2 is held at the server,
// unanswered, while sequences 3 and 4 are sent and refused as gaps
// ("expected 2") until their callers' deadlines end. Sequence 2 may yet
// commit, so 3 and 4 must keep their places: each caller gets
// ErrInDoubt (not "nothing was written": that would leave sequence 3 a
// hole, and every later sequence unwritable under the registration),
// and Resolve writes them after sequence 2's outcome is known. Whether
// sequence 2 then commits or is refused (a hole below 3 and 4: they are
// written under a new registration), every transaction reported written
// is in the log exactly once, in order, and nothing else is. The third
// case loses the requests of 3 and 4 instead (in doubt, maybe written)
// before 2 is refused: 3 and 4 are then known unwritten, and Resolve
// writes both (it used to resend 3, meet the hole, drop 3 and return 4's
// doubt).
func TestGapBehindUnsettledSequence(t *testing.T) {
	refused := apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "test: sequence 2 refused")
	for _, tc := range []struct {
		name   string
		refuse error
		lose   bool
	}{
		{"commits", nil, false},
		{"refused", refused, false},
		{"refused_later_lost", refused, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gate{seq: 2, refuse: tc.refuse, lose: tc.lose, release: make(chan struct{}), seen: map[uint64]chan struct{}{}}
			c := logstoretest.Start(t, 1, nil, grpc.ChainUnaryInterceptor(g.intercept))
			// Plain Appends (no batching), each attempt alive until released.
			cl, err := client.New(client.Config{Addrs: c.Addrs(), MaxBatchBytes: -1, AttemptTimeout: 2 * time.Minute, Logger: logstoretest.QuietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cl.Close() })
			ctx := ctxT(t, 2*time.Minute)
			p := newProducer(t, cl, client.ProducerConfig{ID: "gapped"})
			if _, err := p.Append(ctx, client.NewTxn().Add("t", []byte("first"))); err != nil {
				t.Fatal(err)
			}
			_, epoch := p.RegisteredID()
			g.epoch.Store(epoch)
			type answer struct {
				res *client.Result
				err error
			}
			held := make(chan answer, 1)
			go func() {
				res, err := p.Append(ctx, client.NewTxn().Add("t", []byte("held")))
				held <- answer{res, err}
			}()
			waitCh(t, ctx, g.saw(2), "sequence 2 sent")
			var errs [2]error
			var wg sync.WaitGroup
			for i := range errs {
				short, cancel := context.WithTimeout(ctx, time.Duration(i+1)*time.Second)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer cancel()
					_, errs[i] = p.Append(short, client.NewTxn().Add("t", []byte(fmt.Sprintf("gap%d", i))))
				}()
				waitCh(t, ctx, g.saw(uint64(3+i)), fmt.Sprintf("sequence %d sent", 3+i))
			}
			wg.Wait()
			for i, err := range errs {
				if !errors.Is(err, client.ErrInDoubt) {
					t.Fatalf("append gap%d behind unanswered sequence 2: %v, want ErrInDoubt", i, err)
				}
			}
			close(g.release)
			a := <-held
			want := []string{"first"}
			if tc.refuse == nil {
				if a.err != nil {
					t.Fatalf("held append: %v", a.err)
				}
				want = append(want, "held")
			} else if a.err == nil || errors.Is(a.err, client.ErrInDoubt) || apierr.CodeOf(a.err) != logstorepb.ErrorCode_INVALID_ARGUMENT {
				t.Fatalf("held append refused by the server: %v, want the refusal", a.err)
			}
			var resolved []*client.Result
			for {
				res, err := p.Resolve(ctx)
				if res == nil && err == nil {
					break
				}
				if err != nil {
					t.Fatalf("resolve: %v", err)
				}
				resolved = append(resolved, res)
			}
			if len(resolved) != 2 {
				t.Fatalf("resolved %d transactions, want the 2 refused as gaps", len(resolved))
			}
			want = append(want, "gap0", "gap1", "after")
			after, err := p.Append(ctx, client.NewTxn().Add("t", []byte("after")))
			if err != nil {
				t.Fatalf("append after resolving: %v", err)
			}
			var order []string
			for _, txn := range readLog(t, cl, leaderHead(t, cl)) {
				for _, s := range txn.Slices {
					for _, m := range s.Messages {
						order = append(order, string(m.Value))
					}
				}
			}
			if fmt.Sprint(order) != fmt.Sprint(want) {
				t.Fatalf("log holds %v, want %v", order, want)
			}
			got := valuesIn(readLog(t, cl, leaderHead(t, cl)), "t")
			for i, r := range append(resolved, after) {
				if v := want[len(want)-3+i]; len(got[v]) != 1 || got[v][0] != r.LSN {
					t.Fatalf("%s at lsns %v, its result says lsn %d", v, got[v], r.LSN)
				}
			}
		})
	}
}

func waitCh(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}
