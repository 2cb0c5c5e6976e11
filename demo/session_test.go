package demo

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/shard"
)

// liveCluster is fakeLog plus what a Session reads (the log, the head),
// delivering every new transaction at once to the shards.
type liveCluster struct {
	mu     sync.Mutex // serialises appends, so deliveries go in LSN order
	log    *fakeLog
	shards map[string]*liveShard
}

func newLiveCluster(n int) *liveCluster {
	c := &liveCluster{log: newFakeLog(), shards: map[string]*liveShard{}}
	for i := range n {
		c.shards[ShardTopic(i)] = &liveShard{kv: map[string][]byte{}, changed: make(chan struct{})}
	}
	return c
}

func (c *liveCluster) InitProducer(ctx context.Context, name string) (string, uint64, error) {
	return c.log.InitProducer(ctx, name)
}

func (c *liveCluster) Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := len(c.log.txns)
	resp, err := c.log.Append(ctx, req)
	for _, t := range c.log.txns[before:] {
		for _, s := range t.Slices {
			if sh := c.shards[s.Topic]; sh != nil {
				sh.apply(t.Lsn, s)
			}
		}
	}
	return resp, err
}

func (c *liveCluster) txns() []*logstorepb.Transaction {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.txns
}

func (c *liveCluster) Read(_ context.Context, req *logstorepb.ReadRequest, fn func(*logstorepb.ReadResponse) error) error {
	txns := c.txns()
	return fn(&logstorepb.ReadResponse{Transactions: txns[req.FromLsn-1 : min(req.ToLsn, uint64(len(txns)))]})
}

func (c *liveCluster) LeaderStatus(context.Context) (*logstorepb.StatusResponse, error) {
	return &logstorepb.StatusResponse{HeadLsn: uint64(len(c.txns()))}, nil
}

// liveShard is a shard's state behind the Shard API; WaitApplied blocks
// until the LSN is applied. lose drops the data of every slice (a shard
// that advances its position without storing anything).
type liveShard struct {
	mu      sync.Mutex
	kv      map[string][]byte
	lsn     uint64
	changed chan struct{} // closed and replaced on every apply
	lose    bool
}

func (s *liveShard) apply(lsn uint64, slice *logstorepb.TxnSlice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := shard.ModelApply(s.kv, []string{slice.Topic}, []*logstorepb.TxnSlice{slice}); err != nil {
		panic(err) // the workload writes valid mutations
	}
	if s.lose {
		clear(s.kv)
	}
	s.lsn = lsn
	close(s.changed)
	s.changed = make(chan struct{})
}

// snapshot is the state now, served as fakeShard does.
func (s *liveShard) snapshot() *fakeShard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &fakeShard{kv: maps.Clone(s.kv), lsn: s.lsn, scanLimit: 1 << 30}
}

func (s *liveShard) Get(ctx context.Context, req *shardpb.GetRequest, _ ...grpc.CallOption) (*shardpb.GetResponse, error) {
	return s.snapshot().Get(ctx, req)
}

func (s *liveShard) Scan(ctx context.Context, req *shardpb.ScanRequest, _ ...grpc.CallOption) (*shardpb.ScanResponse, error) {
	return s.snapshot().Scan(ctx, req)
}

func (s *liveShard) WaitApplied(ctx context.Context, req *shardpb.WaitAppliedRequest, _ ...grpc.CallOption) (*shardpb.WaitAppliedResponse, error) {
	for {
		s.mu.Lock()
		lsn, changed := s.lsn, s.changed
		s.mu.Unlock()
		if lsn >= req.Lsn {
			return &shardpb.WaitAppliedResponse{AppliedLsn: lsn}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func runSession(t *testing.T, c *liveCluster) (*Report, string) {
	t.Helper()
	var out strings.Builder
	shards := map[string]shardpb.ShardClient{}
	for id, s := range c.shards {
		shards[id] = s
	}
	rep, err := Session(context.Background(), SessionConfig{
		Cluster: c, Shards: shards, Duration: 50 * time.Millisecond, Clients: 2, Seed: 3,
		CatchUp: 10 * time.Second, Out: &out,
	})
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	return rep, out.String()
}

// A session runs the workload from the head, then checks every shard's
// state against the log read back: all delivered is OK, a shard that lost
// its data is not.
func TestSessionChecksTheShards(t *testing.T) {
	c := newLiveCluster(3)
	rep, out := runSession(t, c)
	if !rep.OK || rep.Committed == 0 || len(rep.Shards) != 3 || rep.StateMismatches != 0 {
		t.Fatalf("report %+v, want OK over 3 shards", rep)
	}
	if !strings.Contains(out, "demo: run ") || !strings.Contains(out, "transactions committed") {
		t.Fatalf("status lines %q", out)
	}

	c = newLiveCluster(3)
	c.shards["shard-1"].lose = true
	rep, _ = runSession(t, c)
	if rep.OK || rep.StateMismatches == 0 {
		t.Fatalf("report %+v, want a state mismatch on shard-1", rep)
	}
	for _, sc := range rep.Shards {
		if sc.Diff.OK() != (sc.Target != "shard-1") {
			t.Fatalf("shard %s diff %+v", sc.Target, sc.Diff)
		}
	}
}
