package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// ackLog is a demo.Appender that remembers every acknowledged Append (a
// histAck: the LSN the LogStore gave it and the transaction id its events
// carry, demo.Order.Txn, also the key of its orders message). A retried
// Append (same producer sequence) is acknowledged once: the call that
// returned without error.
type ackLog struct {
	inner demo.Appender
	n     atomic.Int64
	max   atomic.Uint64
	mu    struct {
		sync.Mutex
		acks []histAck
	}
}

var _ demo.Appender = (*ackLog)(nil)

// InitProducer implements demo.Appender.
func (a *ackLog) InitProducer(ctx context.Context, name string) (string, uint64, error) {
	return a.inner.InitProducer(ctx, name)
}

// Append implements demo.Appender.
func (a *ackLog) Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	resp, err := a.inner.Append(ctx, req)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.mu.acks = append(a.mu.acks, histAck{ID: txnID(req.Slices), LSN: resp.Lsn})
	a.mu.Unlock()
	a.n.Add(1)
	for m := a.max.Load(); resp.Lsn > m && !a.max.CompareAndSwap(m, resp.Lsn); m = a.max.Load() {
	}
	return resp, nil
}

// txnID is the id of a workload transaction: the key of its orders message
// (or of its probe message, TestNemesis's prober; "" when it has none). S is a request's or a read transaction's slice.
func txnID[S interface {
	GetTopic() string
	GetMessages() []*logstorepb.Message
}](slices []S) string {
	for _, s := range slices {
		if (s.GetTopic() == demo.OrdersTopic || s.GetTopic() == probeTopic) && len(s.GetMessages()) > 0 {
			return string(s.GetMessages()[0].Key)
		}
	}
	return ""
}

func (a *ackLog) acks() []histAck {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]histAck(nil), a.mu.acks...)
}

// Load settings: a few producers keep every process busy without starving
// the 2-core machine; an Append may wait out a leader election.
const (
	loadClients       = 4
	loadAppendTimeout = 10 * time.Second
	loadRetryMax      = 90 * time.Second
	// loadMaxDuration caps the workload if the test forgets to stop it.
	loadMaxDuration = time.Hour
)

// load runs the demo workload (demo.Run) in the background until stop, and
// watches the shards' applied LSNs (demo.WatchApplied) for apply latencies
// until stopWatching.
type load struct {
	acks    *ackLog
	rec     *demo.Recorder
	began   time.Time
	stopped atomic.Bool
	ended   time.Time // when stop was first called
	done    chan struct{}
	res     *demo.Result
	err     error

	unwatch  context.CancelFunc
	watchers sync.WaitGroup
}

// startLoad starts the workload; it is stopped at the end of the test at the
// latest.
func startLoad(t testing.TB, app demo.Appender, shards []*shardNode, seed uint64) *load {
	l := &load{acks: &ackLog{inner: app}, rec: demo.NewRecorder(nil), began: time.Now(), done: make(chan struct{})}
	var wctx context.Context
	wctx, l.unwatch = context.WithCancel(context.Background())
	for _, s := range shards {
		l.watchers.Go(func() { demo.WatchApplied(wctx, l.rec, s.id, s.client) })
	}
	cfg := demo.Config{
		Appender:      l.acks,
		Clients:       loadClients,
		Shards:        shardCount,
		Duration:      loadMaxDuration,
		Run:           demo.NewRunID(seed),
		Seed:          seed,
		AppendTimeout: loadAppendTimeout,
		RetryMax:      loadRetryMax,
		Logger:        quietLogger(),
		// demo.Run starts transactions until its clock passes the
		// duration, and finishes (acknowledges or fails) those in flight.
		// stop moves this clock past the end, so nothing is left in doubt:
		// every transaction sent is either acknowledged or has failed. (It
		// only skews the latencies of the last transactions, unused here.)
		Now: func() time.Time {
			if l.stopped.Load() {
				return time.Now().Add(loadMaxDuration)
			}
			return time.Now()
		},
	}
	go func() {
		defer close(l.done)
		l.res, l.err = demo.Run(context.Background(), cfg)
	}()
	t.Cleanup(func() {
		if _, err := l.stop(); err != nil && !t.Failed() {
			t.Error(err)
		}
		l.stopWatching()
	})
	return l
}

// failed returns the workload's error if it ended before stop.
func (l *load) failed() error {
	select {
	case <-l.done:
		if l.err != nil {
			return fmt.Errorf("workload failed: %w", l.err)
		}
		if !l.stopped.Load() {
			return fmt.Errorf("workload ended before it was stopped")
		}
	default:
	}
	return nil
}

// stopWatching stops the applied-LSN watchers (idempotent).
func (l *load) stopWatching() {
	l.unwatch()
	l.watchers.Wait()
}

// waitAcked waits until n more Appends are acknowledged; alive fails the
// test fast when a process of the system crashed.
func waitAcked(t testing.TB, l *load, n int64, alive func() error) {
	t.Helper()
	want := l.acks.n.Load() + n
	testwait.ForErr(t, progressMax, fmt.Sprintf("%d acknowledged appends", want), func() error {
		if err := alive(); err != nil {
			t.Fatal(err)
		}
		if err := l.failed(); err != nil {
			t.Fatal(err)
		}
		if got := l.acks.n.Load(); got < want {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// stop ends the workload and waits for its in-flight transactions.
// Idempotent.
func (l *load) stop() (*demo.Result, error) {
	if !l.stopped.Swap(true) {
		l.ended = time.Now()
	}
	select {
	case <-l.done:
	case <-time.After(loadRetryMax + loadAppendTimeout):
		return nil, fmt.Errorf("workload did not stop within %v", loadRetryMax+loadAppendTimeout)
	}
	if l.res != nil {
		l.res.Elapsed = l.ended.Sub(l.began) // the workload's own clock jumped at stop
	}
	return l.res, l.err
}
