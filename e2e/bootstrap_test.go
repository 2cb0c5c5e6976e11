package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/security"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target/sqlstore" // also registers the "sqlite" driver
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
	msgs  []bootMsg         // the log's content: bootTopic's messages by offset
	head  uint64            // LSN of the last acknowledged Append
}

// bootMsg is one acknowledged message of bootTopic.
type bootMsg struct {
	lsn   uint64
	value []byte
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
		e.msgs = append(e.msgs, bootMsg{lsn: resp.Lsn, value: msg})
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

// waitBelowRetention waits for the LogPlayer's refusal of target id: the
// LogStore no longer holds what it needs (the fetcher's
// ErrBelowRetention: BELOW_RETENTION).
func (e *bootEnv) waitBelowRetention(id string) {
	e.t.Helper()
	var refusal string
	e.c.waitFor(progressMax, "the LogPlayer refusing "+id+" below retention", func() error {
		if refusal = sinkLogLine(e.c.player, "no longer holds"); !strings.Contains(refusal, "target="+id+" ") {
			return fmt.Errorf("no refusal logged yet")
		}
		return nil
	})
	e.t.Logf("the LogPlayer refuses the new target: %s", refusal)
	if !strings.Contains(refusal, "below LogStore retention") {
		e.t.Fatalf("the refusal does not say the LogStore's retention: %s", refusal)
	}
}

// refusedAfterTrim registers the sibling, writes the log's beginning,
// waits until the sibling applied it (caughtUp), lets retention trim it,
// then registers the new target and waits for the LogPlayer to refuse it
// below retention: it cannot be delivered from LSN 0. It returns the
// first retained LSN.
func (e *bootEnv) refusedAfterTrim(sibling, siblingAddr, fresh, freshAddr string, caughtUp func()) uint64 {
	e.t.Helper()
	e.mustCLI("target", "add", "--id", sibling, "--target-addr", siblingAddr, "--topics", bootTopic)
	e.write(300, "a")
	caughtUp()
	first := e.trim()
	e.t.Logf("log trimmed: first retained lsn %d, head %d", first, e.head)
	e.mustCLI("target", "add", "--id", fresh, "--target-addr", freshAddr, "--topics", bootTopic)
	e.waitBelowRetention(fresh)
	return first
}

// TestTargetBootstrapShard: a shard added after retention trimmed the log
// is refused BELOW_RETENTION; cloning it from its sibling shard makes it
// reach exactly the log's content, and the tail keeps flowing to both.
func TestTargetBootstrapShard(t *testing.T) {
	e := startBootEnv(t)
	sibling := e.addShard("shard-0")
	fresh := e.addShard("shard-1")
	first := e.refusedAfterTrim(sibling.id, sibling.addr, fresh.id, fresh.addr, func() { e.waitApplied(sibling) })
	if _, lsn := e.data(fresh); lsn != 0 {
		t.Fatalf("%s applied lsn %d before the clone, want 0", fresh.id, lsn)
	}

	// Typed refusals, each changing nothing: a sibling that is not current
	// enough (the refused, empty shard), an unknown sibling, a target of
	// other topics (registered with an address nobody serves: the topics
	// are checked before anything is dialed).
	e.mustCLI("target", "add", "--id", "other", "--target-addr", freeAddr(t), "--topics", "other-topic")
	for _, c := range []struct{ from, to, want string }{
		{fresh.id, sibling.id, "SIBLING_BEHIND"},
		{"nosuch", fresh.id, "UNKNOWN_SIBLING"},
		{sibling.id, "other", "TOPICS_DIFFER"},
		{sibling.id, sibling.id, "INVALID"},
	} {
		out, err := e.cli("target", "clone", "--from", c.from, "--to", c.to)
		if err == nil || !strings.Contains(out, "refused: "+c.want+":") {
			t.Fatalf("clone --from %s --to %s: %v, want %s\n%s", c.from, c.to, err, c.want, out)
		}
	}
	e.mustCLI("target", "remove", "--id", "other")
	e.write(40, "b")
	// What a restore killed mid-stream leaves: half a staged file. The
	// clone discards it.
	staged := filepath.Join(fresh.dir, shard.StagingFileName)
	if err := os.WriteFile(staged, bytes.Repeat([]byte{0xbb}, 40<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.mustCLI("target", "clone", "--from", sibling.id, "--to", fresh.id)
	if !strings.Contains(out, "cloned "+sibling.id+" into "+fresh.id) {
		t.Fatalf("clone output: %s", out)
	}
	if _, err := os.Stat(staged); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the staged leftover after the clone: %v", err)
	}
	e.write(20, "c") // the tail, delivered by the LogPlayer
	// A rerun (as after a clone killed between its restore and its
	// registration) does not restore again: it registers the target.
	out = e.mustCLI("target", "clone", "--from", sibling.id, "--to", fresh.id)
	if !strings.Contains(out, fresh.id+" already held applied lsn") {
		t.Fatalf("clone rerun output: %s", out)
	}
	e.write(20, "d")
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

// sqliteSink is a `logplayer sink sqlite` process.
type sqliteSink struct {
	id, addr, path string
	proc           *proc
}

// addSQLiteSink starts a SQLite sink id storing bootTopic (not registered).
func (e *bootEnv) addSQLiteSink(id string) *sqliteSink {
	e.t.Helper()
	s := &sqliteSink{id: id, addr: freeAddr(e.t), path: filepath.Join(e.c.dir, id+".db")}
	args := []string{"sink", "sqlite", "--id", id, "--addr", s.addr, "--path", s.path, "--topics", bootTopic}
	// The sinks serve with the events target's certificate: the bundle's
	// identities are fixed, and the LogPlayer checks the CA and the host.
	s.proc = newProc(e.t, e.c.dir, id, append(args, e.c.tls.args(eventsTarget)...)...)
	s.proc.start()
	return s
}

// open opens the sink's database file read-only (SQLite's WAL lets it
// read beside the sink).
func (s *sqliteSink) open() (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+s.path+"?mode=ro&_pragma=busy_timeout(5000)")
}

// sinkRowOf is one row of the sink's table.
type sinkRowOf struct {
	lsn, offset int64
	value       []byte
}

// rows reads the sink's table in offset order.
func (s *sqliteSink) rows() ([]sinkRowOf, error) {
	db, err := s.open()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.Query("SELECT lsn, topic_offset, value FROM " + sqlstore.TableName(bootTopic, "") + " ORDER BY topic_offset")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sinkRowOf
	for rows.Next() {
		var r sinkRowOf
		if err := rows.Scan(&r.lsn, &r.offset, &r.value); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// waitSink waits until s's state row says the head is applied.
func (e *bootEnv) waitSink(s *sqliteSink) {
	e.t.Helper()
	e.c.waitFor(progressMax, fmt.Sprintf("%s applied lsn %d", s.id, e.head), func() error {
		if s.proc.exited() {
			e.t.Fatalf("%s exited", s.id)
		}
		db, err := s.open()
		if err != nil {
			return err
		}
		defer db.Close()
		var lsn int64
		if err := db.QueryRow("SELECT applied_lsn FROM "+sqlstore.StateTable+" WHERE target_id = $1", s.id).Scan(&lsn); err != nil {
			return err
		}
		if lsn < int64(e.head) {
			return fmt.Errorf("applied lsn %d", lsn)
		}
		return nil
	})
}

// checkSink fails unless s's table holds exactly the log's messages: one
// row per offset, with its LSN and value.
func (e *bootEnv) checkSink(s *sqliteSink) {
	e.t.Helper()
	rows, err := s.rows()
	if err != nil {
		e.t.Fatalf("%s: %v", s.id, err)
	}
	if len(rows) != len(e.msgs) {
		e.t.Fatalf("%s holds %d rows, the log %d messages", s.id, len(rows), len(e.msgs))
	}
	for i, r := range rows {
		m := e.msgs[i]
		if r.lsn != int64(m.lsn) || r.offset != int64(i) || !bytes.Equal(r.value, m.value) {
			e.t.Fatalf("%s row %d is (lsn %d, offset %d, %.20q), the log has lsn %d offset %d %.20q",
				s.id, i, r.lsn, r.offset, r.value, m.lsn, i, m.value)
		}
	}
}

// TestTargetBootstrapSQLite: TestTargetBootstrapShard with SQLite sinks:
// the restored sink's table holds every message of the log, from offset
// 0, although the log kept only its tail.
func TestTargetBootstrapSQLite(t *testing.T) {
	e := startBootEnv(t)
	sibling := e.addSQLiteSink("sq-0")
	fresh := e.addSQLiteSink("sq-1")
	first := e.refusedAfterTrim(sibling.id, sibling.addr, fresh.id, fresh.addr, func() { e.waitSink(sibling) })

	e.write(40, "b")
	out := e.mustCLI("target", "clone", "--from", sibling.id, "--to", fresh.id)
	if !strings.Contains(out, "cloned "+sibling.id+" into "+fresh.id) {
		t.Fatalf("clone output: %s", out)
	}
	e.write(40, "c")
	e.waitSink(sibling)
	e.waitSink(fresh)
	e.checkSink(sibling)
	e.checkSink(fresh)
	t.Logf("both sinks hold the log's %d messages (head %d; first retained %d)", len(e.msgs), e.head, first)
	checkRetainedLog(t, e, first)
}
