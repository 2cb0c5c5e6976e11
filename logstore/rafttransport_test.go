package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/testwait"
)

// nopFSM is a raft.FSM that keeps nothing.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// staleFollower is a fake Raft voter on its own NetworkTransport: it grants
// every (pre-)vote and acknowledges appends, until, in each term, it has
// seen staleAfter appends that carry entries; from then on it answers every
// append of that term with a higher term, as a follower that has moved on
// does.
type staleFollower struct {
	trans      *raft.NetworkTransport
	staleAfter int
	rounds     atomic.Int64 // terms answered with a higher term
}

func (f *staleFollower) serve(ctx context.Context) {
	appends := map[uint64]int{}
	for {
		var rpc raft.RPC
		select {
		case rpc = <-f.trans.Consumer():
		case <-ctx.Done():
			return
		}
		switch req := rpc.Command.(type) {
		case *raft.RequestPreVoteRequest:
			rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: req.RPCHeader, Term: req.Term, Granted: true}, nil)
		case *raft.RequestVoteRequest:
			rpc.Respond(&raft.RequestVoteResponse{RPCHeader: req.RPCHeader, Term: req.Term, Granted: true}, nil)
		case *raft.AppendEntriesRequest:
			resp := &raft.AppendEntriesResponse{RPCHeader: req.RPCHeader, Term: req.Term, Success: true, LastLog: req.PrevLogEntry}
			if n := len(req.Entries); n > 0 {
				resp.LastLog = req.Entries[n-1].Index
				appends[req.Term]++
			}
			if appends[req.Term] >= f.staleAfter {
				if appends[req.Term] == f.staleAfter && len(req.Entries) > 0 {
					f.rounds.Add(1)
				}
				resp.Term, resp.Success = req.Term+1, false
			}
			rpc.Respond(resp, nil)
		default:
			rpc.Respond(nil, fmt.Errorf("staleFollower: unexpected %T", rpc.Command))
		}
	}
}

// leaderGate is open while r leads, so the load below waits instead of
// spinning on ErrNotLeader between elections. Fed by r.LeaderCh().
type leaderGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while leader
}

func (g *leaderGate) watch(ctx context.Context, ch <-chan bool) {
	for {
		select {
		case lead := <-ch:
			g.mu.Lock()
			select {
			case <-g.open:
				if !lead {
					g.open = make(chan struct{})
				}
			default:
				if lead {
					close(g.open)
				}
			}
			g.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

func (g *leaderGate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// TestRaftShutdownAfterPipelineStaleTerm: a leader whose pipelined
// AppendEntries are answered with a higher term must still shut down.
// In hashicorp/raft v1.7.3, replication.go:pipelineDecode returns on that
// answer and no longer reads the pipeline's Consumer; net_transport.go's
// netPipeline.decodeResponses then blocks sending the next response on
// doneCh, and replication.go:pipelineReplicate, when it sends once more
// before it sees finishCh, blocks for ever in netPipeline.AppendEntries
// on inprogressCh: raft.Shutdown waits for that goroutine (failed before
// the fix in rafttransport.go: Shutdown did not return). Each leadership
// term is one try; the follower grants the next election at once, so the
// test runs many terms and then shuts down.
func TestRaftShutdownAfterPipelineStaleTerm(t *testing.T) {
	const rounds = 40
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fTrans, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 5*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer fTrans.Close()
	follower := &staleFollower{trans: fTrans, staleAfter: 20}
	go follower.serve(ctx)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The transport as NewNode builds it, recording its pipelines.
	lTrans := &pipelineRecorder{raftTransport: newRaftTransport(&raft.NetworkTransportConfig{
		Stream: tcpStreamLayer{lis}, MaxPool: 3, Timeout: 5 * time.Second, Logger: hclog.NewNullLogger(),
	})}
	defer lTrans.Close()

	conf := raft.DefaultConfig()
	conf.LocalID = "leader"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	conf.CommitTimeout = time.Millisecond
	conf.MaxAppendEntries = 4
	conf.SnapshotInterval, conf.SnapshotThreshold = time.Hour, 1<<30
	conf.Logger = hclog.NewNullLogger()
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	servers := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "leader", Address: lTrans.LocalAddr()},
		{Suffrage: raft.Voter, ID: "follower", Address: fTrans.LocalAddr()},
	}}
	if err := raft.BootstrapCluster(conf, store, store, snaps, lTrans, servers); err != nil {
		t.Fatal(err)
	}
	r, err := raft.NewRaft(conf, nopFSM{}, store, store, snaps, lTrans)
	if err != nil {
		t.Fatal(err)
	}
	gate := &leaderGate{open: make(chan struct{})}
	go gate.watch(ctx, r.LeaderCh())

	// Load: enough applies in flight that replication always has more to
	// send, so pipelineReplicate keeps calling AppendEntries.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	for range 8 {
		load.Add(1)
		go func() {
			defer load.Done()
			for loadCtx.Err() == nil {
				err := r.Apply([]byte("x"), time.Second).Error()
				if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
					select {
					case <-gate.wait():
					case <-loadCtx.Done():
					}
				}
			}
		}()
	}
	testwait.For(t, 2*testwait.Max, fmt.Sprintf("%d leadership terms ended by a higher term", rounds),
		func() bool { return follower.rounds.Load() >= rounds })
	stopLoad()
	loadDone := make(chan struct{})
	go func() { load.Wait(); close(loadDone) }()
	select {
	case <-loadDone:
	case <-time.After(testwait.Max):
		t.Fatal("load did not stop")
	}

	shutdown := make(chan error, 1)
	go func() { shutdown <- r.Shutdown().Error() }()
	select {
	case err := <-shutdown:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testwait.Max):
		t.Fatalf("raft.Shutdown did not return after %d terms ended by a higher term; stuck pipeline goroutines:\n%s",
			follower.rounds.Load(), pipelineStacks())
	}
	// Replication was pipelined, and every pipeline was closed: its
	// forwarder has ended.
	pipes := lTrans.all()
	if len(pipes) == 0 {
		t.Fatal("no AppendEntries pipeline opened: replication was not pipelined")
	}
	testwait.For(t, testwait.Max, "every pipeline's forwarder ended", func() bool {
		for _, p := range pipes {
			select {
			case <-p.ended:
			default:
				return false
			}
		}
		return true
	})
}

// pipelineRecorder is the node's Raft transport, keeping every pipeline it
// opens.
type pipelineRecorder struct {
	*raftTransport
	mu    sync.Mutex
	pipes []*drainingPipeline
}

func (r *pipelineRecorder) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := r.raftTransport.AppendEntriesPipeline(id, target)
	if err == nil {
		r.mu.Lock()
		r.pipes = append(r.pipes, p.(*drainingPipeline))
		r.mu.Unlock()
	}
	return p, err
}

func (r *pipelineRecorder) all() []*drainingPipeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*drainingPipeline(nil), r.pipes...)
}

// pipelineStacks returns the stacks of the goroutines inside hashicorp/raft's
// netPipeline or a drainingPipeline, for the failure message.
func pipelineStacks() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "netPipeline") || strings.Contains(g, "drainingPipeline") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
