package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/keepalive"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
)

// Workload of TestHistoryRealRun: writers append to topic "s1" (and, every
// third transaction, to "events", which the shard does not own); readers
// read short ranges and the head while they write.
const (
	realWriters      = 4
	realReaders      = 2
	realAppendsEach  = 50
	realKeys         = 8 // hot keys, so a write applied twice or lost shows in the state
	realRunTimeout   = time.Minute
	realOpTimeout    = 10 * time.Second
	realShardTopic   = "s1"
	realEventsTopic  = "events"
	realReadRangeMax = 5
)

// realTxnID is the id a workload transaction carries: the key of its first
// message.
func realTxnID(t *logstorepb.Transaction) string {
	if len(t.Slices) == 0 || len(t.Slices[0].Messages) == 0 {
		return ""
	}
	return string(t.Slices[0].Messages[0].Key)
}

// TestHistoryRealRun records a history from a real LogStore node, LogPlayer
// and shard in this process and runs every checker over it: what a nemesis
// test does after its faults, without the faults. Nothing may be reported.
func TestHistoryRealRun(t *testing.T) {
	ls := logstoretest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), realRunTimeout)
	defer cancel()

	applied := newApplyLog()
	shardDir := t.TempDir()
	sh, err := shard.Open(shard.Config{
		Dir: shardDir, ID: realShardTopic, Logger: logstoretest.QuietLogger(),
		WrapStore: func(s target.Store) target.Store { return applied.Store(realShardTopic, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	served := make(chan error, 1) // the shard's Serve result
	go func() { served <- sh.Serve(runCtx, lis) }()
	p, err := logplayer.New(logplayer.Config{
		PlayerID: "histcheck", LogStore: ls.Addrs(),
		Targets:   []logplayer.TargetConfig{{ID: realShardTopic, Address: lis.Addr().String(), Topics: []string{realShardTopic}}},
		Keepalive: keepalive.ClientParameters{Time: -1}, Logger: logstoretest.QuietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1) // the Player's Run result
	go func() { ran <- p.Run(runCtx) }()
	cl, err := client.New(client.Config{Addrs: ls.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	rec := newHistRecorder()
	var mu sync.Mutex
	var acks []histAck
	var writers, readers sync.WaitGroup
	writing := make(chan struct{}) // closed when every writer is done
	for w := range realWriters {
		writers.Go(func() {
			for i := range realAppendsEach {
				id := fmt.Sprintf("w%d-%d", w, i)
				req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: realShardTopic, Messages: []*logstorepb.Message{
					{Key: []byte(id), Value: shard.EncodePut(fmt.Appendf(nil, "k%d", i%realKeys), []byte(id))},
				}}}}
				if i%3 == 0 {
					req.Slices = append(req.Slices, &logstorepb.Slice{Topic: realEventsTopic, Messages: []*logstorepb.Message{{Value: []byte(id)}, {Value: []byte(id)}}})
				}
				call := rec.Now()
				actx, acancel := context.WithTimeout(ctx, realOpTimeout)
				resp, err := cl.Append(actx, req)
				acancel()
				rec.Append(w, id, req, call, resp, err)
				if err == nil {
					mu.Lock()
					acks = append(acks, histAck{ID: id, LSN: resp.Lsn})
					mu.Unlock()
				}
			}
		})
	}
	for r := range realReaders {
		reader := realWriters + r
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-writing:
					return
				default:
				}
				call := rec.Now()
				st, err := cl.LeaderStatus(ctx)
				if err != nil || st.HeadLsn == 0 {
					continue
				}
				statusDone := rec.Now()
				from := uint64(1) // the last i%realReadRangeMax transactions, never below LSN 1
				if back := uint64(i % realReadRangeMax); st.HeadLsn > back {
					from = st.HeadLsn - back
				}
				txns, err := readRange(ctx, cl, from, st.HeadLsn)
				if err != nil {
					continue
				}
				if i%2 == 0 {
					// The head as the leader said it: the read is placed
					// within the Status call, its contents are immutable.
					rec.Add(histOp{Client: reader, Kind: opRead, Call: call, Return: statusDone,
						From: from, To: st.HeadLsn, ToHead: true, Txns: txns})
				} else {
					rec.Read(reader, from, st.HeadLsn, false, call, txns)
				}
			}
		})
	}
	writers.Wait()
	close(writing)
	readers.Wait()

	st, err := cl.LeaderStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head := st.HeadLsn
	testwait.For(t, realRunTimeout, "the shard to apply the head", func() bool {
		ts := p.Targets()
		return len(ts) == 1 && uint64(ts[0].LastAck) >= head
	})
	stopRun()
	if err := errors.Join(<-ran, <-served); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}

	var log []*logstorepb.Transaction
	if err := cl.Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, ToLsn: head}, func(r *logstorepb.ReadResponse) error {
		log = append(log, r.Transactions...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var final []histTxn
	for _, tx := range log {
		final = append(final, histTxnOf(tx, realTxnID))
	}

	ops := resolveUnknown(rec.Ops(), final)
	rep, err := checkLinearizable(ops, linearizableConfig{
		Timeout: realRunTimeout, Visualization: filepath.Join(t.TempDir(), "linearizability.html"),
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("linearizability: %s", rep)
	if rep.Reads == 0 {
		t.Error("no read recorded")
	}
	if len(acks) != realWriters*realAppendsEach {
		t.Errorf("%d appends acknowledged of %d (no faults: every one must be)", len(acks), realWriters*realAppendsEach)
	}
	if v := ackViolations(logIDs(log, realTxnID), acks); !v.OK() {
		t.Errorf("acks: %d violations: %v", v.Count, v.List)
	}
	data, state, err := shard.ReadDir(shardDir)
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]uint64{}
	for topic, off := range state.Topics {
		next[topic] = uint64(off)
	}
	tg := histTarget{
		ID: realShardTopic, Topics: []string{realShardTopic}, AppliedLSN: uint64(state.AppliedLSN),
		NextOffsets: next, Applied: applied.Deliveries(realShardTopic), State: data,
	}
	if v := targetViolations(log, shard.ModelApply, []histTarget{tg})[realShardTopic]; !v.OK() {
		t.Errorf("target %s: %d violations: %v", realShardTopic, v.Count, v.List)
	}

	// The same records with one fault each must not pass.
	if v := ackViolations(logIDs(log[:len(log)-1], realTxnID), acks); v.OK() {
		t.Error("CheckAcks: the last acknowledged transaction left out of the log is not reported")
	}
	i := len(tg.Applied) / 2
	for len(tg.Applied[i].Slices) == 0 { // a progress marker carries no data
		i++
	}
	tg.Applied = slices.Delete(slices.Clone(tg.Applied), i, i+1)
	if v := targetViolations(log, shard.ModelApply, []histTarget{tg})[realShardTopic]; v.OK() {
		t.Error("CheckTargets: a delivery left out of the applied record is not reported")
	}
	t.Logf("log of %d transactions, %d acknowledged, shard applied lsn %d with %d keys",
		len(log), len(acks), state.AppliedLSN, len(data))
}

// readRange reads [from, to] and converts the transactions for the history.
func readRange(ctx context.Context, cl *client.Client, from, to uint64) ([]histTxn, error) {
	var out []histTxn
	err := cl.Read(ctx, &logstorepb.ReadRequest{FromLsn: from, ToLsn: to}, func(r *logstorepb.ReadResponse) error {
		for _, tx := range r.Transactions {
			out = append(out, histTxnOf(tx, realTxnID))
		}
		return nil
	})
	return out, err
}
