package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/security"
	"github.com/logplayer/logplayer/shard"
)

// Bootstrapping a target after retention trimmed the log (issue #29, item
// 1), with real processes: one LogStore node whose retention deletes
// small sealed segments, a LogPlayer group member, and targets registered
// in the LogStore's registry with `logplayer target add`. A target
// registered after the trim is refused BELOW_RETENTION by the LogPlayer;
// `logplayer target clone --from SIBLING --to NEW` seeds it from the
// sibling's snapshot and registers it again, and the LogPlayer delivers the
// tail: in the end both hold exactly the log's content.

// bootTopic is the topic both shards own (the clone needs the same topics).
const bootTopic = "boot"

// Retention of the test's LogStore: segments sealed at bootSegment bytes,
// all but bootRetain bytes of them deleted every bootRetentionEvery.
const (
	bootSegment        = "16KiB"
	bootRetain         = "32KiB"
	bootRetentionEvery = "300ms"
)

// bootEnv is the system of a bootstrap test.
type bootEnv struct {
	t     *testing.T
	c     *cluster
	model map[string]string // the log's content: key -> value after every acknowledged Append
	head  uint64            // LSN of the last acknowledged Append
}

func startBootEnv(t *testing.T) *bootEnv {
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	c := &cluster{t: t, dir: dir, phaseAcks: processPhaseAcks, tls: writeTLS(t, tlsDir, tlsDir, nil)}
	n := &storeNode{id: "n1", api: freeAddr(t), raft: freeAddr(t), metrics: freeAddr(t)}
	args := []string{"store", "--id", n.id, "--data-dir", filepath.Join(dir, n.id),
		"--raft-addr", n.raft, "--api-addr", n.api, "--metrics-addr", n.metrics,
		"--heartbeat-timeout", raftHeartbeat.String(), "--election-timeout", raftElection.String(),
		"--allow-legacy-producers", "--peer", fmt.Sprintf("%s=%s/%s", n.id, n.raft, n.api),
		"--segment-bytes", bootSegment, "--retention-bytes", bootRetain, "--retention-interval", bootRetentionEvery}
	n.proc = newProc(t, dir, n.id, append(args, c.tls.args(n.id)...)...)
	n.proc.start()
	c.stores = []*storeNode{n}
	c.connect()
	player := append(c.playerArgs(), "--group", "boot", "--admin-addr", freeAddr(t), "--metrics-addr", freeAddr(t))
	c.player = newProc(t, dir, "player", player...)
	c.player.start()
	return &bootEnv{t: t, c: c, model: map[string]string{}}
}

// addShard starts shard process id owning bootTopic (not registered).
func (e *bootEnv) addShard(id string) *shardNode {
	e.t.Helper()
	s := &shardNode{id: id, addr: freeAddr(e.t), metrics: freeAddr(e.t)}
	s.dir = filepath.Join(e.c.dir, id)
	args := []string{"shard", "--id", id, "--topics", bootTopic, "--addr", s.addr, "--data-dir", s.dir, "--metrics-addr", s.metrics}
	s.proc = newProc(e.t, e.c.dir, id, append(args, e.c.tls.args(id)...)...)
	s.proc.start()
	s.client = shardpb.NewShardClient(dial(e.t, s.addr, e.c.tls.dialOptions(e.t)...))
	e.c.shards = append(e.c.shards, s)
	return s
}

// cli runs `logplayer args...` as the test's admin identity against the
// LogStore and returns its output and error.
func (e *bootEnv) cli(args ...string) (string, error) {
	e.t.Helper()
	tls := e.c.tls
	args = append(args, "--addr", strings.Join(e.c.storeAddrs(), ","), "--timeout", "30s",
		"--tls-ca", filepath.Join(tls.dir, security.CACertFile),
		"--tls-cert", filepath.Join(tls.dir, testIdentity+".crt"), "--tls-key", filepath.Join(tls.dir, testIdentity+".key"))
	ctx, cancel := context.WithTimeout(context.Background(), progressMax)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary(e.t), args...).CombinedOutput()
	e.t.Logf("$ logplayer %s\n%s", strings.Join(args[:min(len(args), 6)], " "), out)
	return string(out), err
}

func (e *bootEnv) mustCLI(args ...string) string {
	e.t.Helper()
	out, err := e.cli(args...)
	if err != nil {
		e.t.Fatalf("logplayer %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// write appends n transactions of puts (every fifth a delete) to bootTopic
// over keys k000..k099, one at a time, and keeps the model.
func (e *bootEnv) write(n int, round string) {
	e.t.Helper()
	value := strings.Repeat("v", 400)
	for i := range n {
		key := fmt.Sprintf("k%03d", (len(e.model)*7+i*13)%100)
		msg := shard.EncodePut([]byte(key), []byte(round+value))
		if i%5 == 4 {
			msg = shard.EncodeDelete([]byte(key))
		}
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout*4)
		resp, err := e.c.client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
			{Topic: bootTopic, Messages: []*logstorepb.Message{{Value: msg}}}}})
		cancel()
		if err != nil {
			e.t.Fatalf("append %d of %s: %v", i, round, err)
		}
		if i%5 == 4 {
			delete(e.model, key)
		} else {
			e.model[key] = round + value
		}
		e.head = resp.Lsn
	}
}

// waitApplied waits until s has applied the head.
func (e *bootEnv) waitApplied(s *shardNode) {
	e.t.Helper()
	e.c.waitFor(progressMax, fmt.Sprintf("%s applied lsn %d", s.id, e.head), func() error {
		lsn, err := s.applied(e.head)
		if err == nil && lsn < e.head {
			err = fmt.Errorf("applied %d", lsn)
		}
		return err
	})
}

// data is s's whole key space and the applied LSN it reflects.
func (e *bootEnv) data(s *shardNode) (map[string]string, uint64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	sc, err := s.client.Scan(ctx, &shardpb.ScanRequest{Limit: shard.MaxScanLimit})
	if err != nil {
		e.t.Fatalf("scan %s: %v", s.id, err)
	}
	out := map[string]string{}
	for _, kv := range sc.Items {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, sc.AppliedLsn
}

// trim forces a durable snapshot (a backup takes one: retention never
// deletes above the newest) and waits until retention deleted the log's
// beginning; it returns the first retained LSN.
func (e *bootEnv) trim() uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), progressMax)
	defer cancel()
	if err := e.c.client.Backup(ctx, func(*logstorepb.BackupInfo) (io.Writer, error) { return io.Discard, nil }); err != nil {
		e.t.Fatalf("backup (to force a snapshot): %v", err)
	}
	var first uint64
	e.c.waitFor(progressMax, "retention to trim the log", func() error {
		st, err := e.c.status(e.c.stores[0])
		if err != nil {
			return err
		}
		if first = st.FirstLsn; first <= 1 {
			return fmt.Errorf("first retained lsn %d (head %d)", first, st.HeadLsn)
		}
		return nil
	})
	return first
}

// TestTargetBootstrapShard: a shard added after retention trimmed the log
// is refused BELOW_RETENTION; cloning it from its sibling shard makes it
// reach exactly the log's content, and the tail keeps flowing to both.
func TestTargetBootstrapShard(t *testing.T) {
	e := startBootEnv(t)
	sibling := e.addShard("shard-0")
	fresh := e.addShard("shard-1")
	e.mustCLI("target", "add", "--id", sibling.id, "--target-addr", sibling.addr, "--topics", bootTopic)
	e.write(300, "a")
	e.waitApplied(sibling)
	first := e.trim()
	t.Logf("log trimmed: first retained lsn %d, head %d", first, e.head)

	// The new shard, registered now, cannot be delivered from LSN 0.
	e.mustCLI("target", "add", "--id", fresh.id, "--target-addr", fresh.addr, "--topics", bootTopic)
	var refusal string
	e.c.waitFor(progressMax, "the LogPlayer refusing shard-1 below retention", func() error {
		if refusal = sinkLogLine(e.c.player, "no longer holds"); !strings.Contains(refusal, fresh.id) {
			return fmt.Errorf("no refusal logged yet")
		}
		return nil
	})
	t.Logf("the LogPlayer refuses the new target: %s", refusal)
	if !strings.Contains(refusal, "below LogStore retention") { // the fetcher's ErrBelowRetention (BELOW_RETENTION)
		t.Fatalf("the refusal does not say BELOW_RETENTION: %s", refusal)
	}
	if _, lsn := e.data(fresh); lsn != 0 {
		t.Fatalf("%s applied lsn %d before the clone, want 0", fresh.id, lsn)
	}

	// A sibling that is not current enough (the refused, empty shard) is
	// refused, and nothing changes on the target.
	out, err := e.cli("target", "clone", "--from", fresh.id, "--to", sibling.id)
	if err == nil || !strings.Contains(out, "SIBLING_BEHIND") {
		t.Fatalf("clone from a sibling below retention: %v\n%s", err, out)
	}
	e.write(40, "b")
	out = e.mustCLI("target", "clone", "--from", sibling.id, "--to", fresh.id)
	if !strings.Contains(out, "cloned "+sibling.id+" into "+fresh.id) {
		t.Fatalf("clone output: %s", out)
	}
	e.write(40, "c") // the tail, delivered by the LogPlayer
	e.waitApplied(sibling)
	e.waitApplied(fresh)

	want := e.model
	got0, lsn0 := e.data(sibling)
	got1, lsn1 := e.data(fresh)
	if !maps.Equal(got0, want) || !maps.Equal(got1, want) {
		t.Fatalf("after the clone and the tail (log head %d): the log holds %d keys, %s %d keys at lsn %d, %s %d keys at lsn %d; "+
			"equal to the log: %v, %v", e.head, len(want), sibling.id, len(got0), lsn0, fresh.id, len(got1), lsn1,
			maps.Equal(got0, want), maps.Equal(got1, want))
	}
	t.Logf("both shards hold the log's %d keys (head %d; first retained %d)", len(want), e.head, first)
	checkRetainedLog(t, e, first)
}

// checkRetainedLog reads the retained log back and checks that every
// transaction in it is one the test appended (so the model is the log's
// content): the last value of each key written in the retained range is
// the model's.
func checkRetainedLog(t *testing.T, e *bootEnv, first uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), progressMax)
	defer cancel()
	st, err := e.c.status(e.c.stores[0])
	if err != nil {
		t.Fatal(err)
	}
	last := map[string][]byte{}
	err = e.c.client.Read(ctx, &logstorepb.ReadRequest{FromLsn: st.FirstLsn, ToLsn: e.head}, func(r *logstorepb.ReadResponse) error {
		for _, txn := range r.Transactions {
			for _, sl := range txn.Slices {
				for _, m := range sl.Messages {
					mu, err := shard.DecodeMutation(m.Value)
					if err != nil {
						return err
					}
					if mu.Op == shardpb.Mutation_DELETE {
						last[string(mu.Key)] = nil
					} else {
						last[string(mu.Key)] = mu.Value
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the retained log [%d, %d]: %v", st.FirstLsn, e.head, err)
	}
	for k, v := range last {
		if w, ok := e.model[k]; (v == nil) == ok || (v != nil && !bytes.Equal(v, []byte(w))) {
			t.Fatalf("the log's last write of %s in [%d, %d] is %.20q, the model says %.20q (present %v)", k, st.FirstLsn, e.head, v, w, ok)
		}
	}
}
