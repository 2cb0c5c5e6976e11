package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Tiered history (issue #29, logstore/tier) with real processes: a store
// node with small segments and aggressive retention, its tier an S3 server
// (internal/fakes3: gofakes3 on a bbolt file) running as its own process on
// loopback.

// fakeS3Build is the test S3 server binary.
var fakeS3Build = &builtBinary{pkg: "../internal/fakes3"}

// tierTopic is the topic the test writes (one message per transaction).
const tierTopic = "tier.a"

// tierEnv is the system of the tiered-history tests.
type tierEnv struct {
	t       *testing.T
	dir     string
	s3      *proc
	store   *proc
	api     string
	metrics string
	client  *client.Client
	// values[i] is the message of the transaction at LSN i+1.
	values []string
}

func startTierEnv(t *testing.T) *tierEnv {
	e := &tierEnv{t: t, dir: t.TempDir(), api: freeAddr(t), metrics: freeAddr(t)}
	s3addr := freeAddr(t)
	e.s3 = newProc(t, e.dir, "fakes3", "--addr", s3addr, "--db", filepath.Join(e.dir, "s3.bolt"))
	e.s3.bin = fakeS3Build
	e.s3.start()
	raft := freeAddr(t)
	e.store = newProc(t, e.dir, "n1", "store", "--id", "n1", "--data-dir", filepath.Join(e.dir, "n1"),
		"--raft-addr", raft, "--api-addr", e.api, "--metrics-addr", e.metrics,
		"--peer", fmt.Sprintf("n1=%s/%s", raft, e.api), "--allow-legacy-producers",
		"--segment-bytes", "16KiB", "--retention-bytes", "64KiB", "--retention-interval", "200ms",
		"--snapshot-interval", "300ms", "--snapshot-threshold", "32",
		"--tier-url", "s3://logs/e2e", "--tier-endpoint", "http://"+s3addr, "--tier-cache-bytes", "64KiB")
	e.store.env = []string{"AWS_ACCESS_KEY_ID=e2e", "AWS_SECRET_ACCESS_KEY=e2e-secret", "AWS_REGION=us-east-1"}
	e.store.start()
	cl, err := client.New(client.Config{Addrs: []string{e.api}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	e.client = cl
	e.waitStatus("a leader", func(st *logstorepb.StatusResponse) error {
		if st.Role != "leader" {
			return fmt.Errorf("role %s", st.Role)
		}
		return nil
	})
	return e
}

// waitStatus polls the node's status until cond holds (progressMax).
func (e *tierEnv) waitStatus(what string, cond func(*logstorepb.StatusResponse) error) *logstorepb.StatusResponse {
	e.t.Helper()
	var got *logstorepb.StatusResponse
	testwait.ForErr(e.t, progressMax, what, func() error {
		st, err := e.status()
		if err == nil {
			err = cond(st)
		}
		if err == nil {
			got = st
		}
		return err
	})
	return got
}

func (e *tierEnv) status() (*logstorepb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	return e.client.Status(ctx, e.api)
}

// write appends n transactions of one 1 KiB message each, one at a time,
// and checks each lands at the next LSN.
func (e *tierEnv) write(n int) {
	e.t.Helper()
	for range n {
		v := fmt.Sprintf("lsn-%06d-", len(e.values)+1)
		for len(v) < 1024 {
			v += "x"
		}
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		resp, err := e.client.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: tierTopic, Messages: []*logstorepb.Message{{Value: []byte(v)}}}}})
		cancel()
		if err != nil {
			e.t.Fatalf("append %d: %v", len(e.values)+1, err)
		}
		e.values = append(e.values, v)
		if resp.Lsn != uint64(len(e.values)) {
			e.t.Fatalf("append landed at lsn %d, want %d", resp.Lsn, len(e.values))
		}
	}
}

// checkLog reads the log from LSN 1 (Read) and the topic from offset 0
// (TopicReader) and compares both with what was written.
func (e *tierEnv) checkLog() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), progressMax)
	defer cancel()
	next := uint64(1)
	err := e.client.Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, ToLsn: uint64(len(e.values))}, func(resp *logstorepb.ReadResponse) error {
		for _, txn := range resp.Transactions {
			if txn.Lsn != next {
				return fmt.Errorf("read lsn %d, want %d", txn.Lsn, next)
			}
			if got := string(txn.Slices[0].Messages[0].Value); got != e.values[next-1] {
				return fmt.Errorf("lsn %d holds %.20q, want %.20q", next, got, e.values[next-1])
			}
			next++
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("Read from lsn 1: %v", err)
	}
	if int(next-1) != len(e.values) {
		e.t.Fatalf("Read from lsn 1 returned through lsn %d, want %d", next-1, len(e.values))
	}
	r, err := e.client.NewTopicReader(client.TopicReaderConfig{Topic: tierTopic, FromOffset: 0, Limit: uint64(len(e.values))})
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	for i := range e.values {
		m, err := r.Next(ctx)
		if err != nil {
			e.t.Fatalf("TopicReader at offset %d: %v", i, err)
		}
		if m.Offset != uint64(i) || string(m.Message.Value) != e.values[i] {
			e.t.Fatalf("TopicReader: offset %d holds %.20q, want offset %d %.20q", m.Offset, m.Message.Value, i, e.values[i])
		}
	}
}

// metric returns the node's value of a metric family (summed over series).
func (e *tierEnv) metric(name string) float64 {
	e.t.Helper()
	samples, err := scrape(e.metrics, name)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(samples) == 0 {
		e.t.Fatalf("no %s on /metrics", name)
	}
	var sum float64
	for _, s := range samples {
		sum += s.value
	}
	return sum
}

// TestTieredHistory: writes until retention trimmed the local log, then a
// reader from LSN 1 and a topic reader from offset 0 get exactly what was
// written (served from the tier below local retention). Then the S3
// process is killed: writes go on, retention keeps every segment not
// uploaded (upload lag shows it), the store node is killed (-9) and
// restarted while uploads are pending; once S3 is back the uploads finish,
// retention trims again, and the whole log still reads back exactly.
func TestTieredHistory(t *testing.T) {
	e := startTierEnv(t)
	deadline := time.Now().Add(progressMax)
	for {
		e.write(50)
		st, err := e.status()
		if err == nil && st.LocalFirstLsn > 1 && st.TierLastLsn > 0 {
			t.Logf("after %d transactions: local lsn %d..%d, tier %d..%d, first readable %d",
				len(e.values), st.LocalFirstLsn, st.HeadLsn, st.TierFirstLsn, st.TierLastLsn, st.FirstLsn)
			if st.FirstLsn != 1 {
				t.Fatalf("first readable lsn %d, want 1 (the tier holds the rest)", st.FirstLsn)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retention trimmed nothing after %d transactions (status %v, %v)", len(e.values), st, err)
		}
	}
	e.checkLog()
	if v := e.metric("logstore_tier_reads_total"); v == 0 {
		t.Fatal("logstore_tier_reads_total is 0 after reading below local retention")
	}
	if v := e.metric("logstore_tier_uploaded_bytes_total"); v == 0 {
		t.Fatal("logstore_tier_uploaded_bytes_total is 0")
	}

	// The object store goes away.
	e.s3.kill()
	st, err := e.status()
	if err != nil {
		t.Fatal(err)
	}
	tierLast := st.TierLastLsn
	e.write(200)
	e.waitStatus("upload lag while S3 is down", func(st *logstorepb.StatusResponse) error {
		if st.TierLagSegments < 2 {
			return fmt.Errorf("lag %d segments", st.TierLagSegments)
		}
		return nil
	})
	// Retention runs every 200 ms; for 2 s it must not delete past what
	// the tier holds.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		st, err := e.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.LocalFirstLsn > tierLast+1 {
			t.Fatalf("retention deleted up to lsn %d while the tier holds only up to %d", st.LocalFirstLsn-1, tierLast)
		}
	}
	if v := e.metric("logstore_tier_upload_errors_total"); v == 0 {
		t.Fatal("no failed upload attempt counted while S3 is down")
	}
	if v := e.metric("logstore_tier_upload_lag_bytes"); v == 0 {
		t.Fatal("logstore_tier_upload_lag_bytes is 0 while S3 is down")
	}

	// kill -9 with uploads pending, restart while S3 is still down.
	e.store.kill()
	e.store.start()
	e.waitStatus("the restarted node leading with its lag known", func(st *logstorepb.StatusResponse) error {
		if st.Role != "leader" || st.TierLagSegments < 2 {
			return fmt.Errorf("role %s, lag %d segments", st.Role, st.TierLagSegments)
		}
		return nil
	})
	e.write(50)

	e.s3.start()
	e.waitStatus("uploads done and retention trimming again", func(st *logstorepb.StatusResponse) error {
		if st.TierLagSegments != 0 || st.LocalFirstLsn <= tierLast+1 || st.FirstLsn != 1 {
			return fmt.Errorf("lag %d segments, local first lsn %d (tier held up to %d before), first readable %d",
				st.TierLagSegments, st.LocalFirstLsn, tierLast, st.FirstLsn)
		}
		return nil
	})
	e.checkLog()
	if v := e.metric("logstore_tier_checksum_failures_total"); v != 0 {
		t.Fatalf("logstore_tier_checksum_failures_total = %v", v)
	}
	// `logplayer status` shows the local and tiered ranges.
	out, err := exec.Command(binary(t), "status", "--addr", e.api).CombinedOutput()
	if err != nil {
		t.Fatalf("logplayer status: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "TIERED LSNS") || !strings.Contains(string(out), " 1..") {
		t.Fatalf("logplayer status shows no tiered range:\n%s", out)
	}
	t.Logf("logplayer status:\n%s", out)
	e.store.checkLog()
}

// TestTieredHistoryNewTarget: after retention trimmed the local log, a
// LogPlayer started with a new, empty target (the events target, topic
// tierTopic) delivers it the whole log from LSN 1, the part below local
// retention read from the tier through the fetcher; the target's bbolt
// file then holds exactly the topic's messages, each once, at its offset.
func TestTieredHistoryNewTarget(t *testing.T) {
	e := startTierEnv(t)
	for {
		e.write(50)
		st, err := e.status()
		if err == nil && st.LocalFirstLsn > 20 && st.FirstLsn == 1 {
			t.Logf("after %d transactions: local lsn %d..%d, tier %d..%d", len(e.values), st.LocalFirstLsn, st.HeadLsn, st.TierFirstLsn, st.TierLastLsn)
			break
		}
		if len(e.values) > 2000 {
			t.Fatalf("retention trimmed nothing after %d transactions (status %v, %v)", len(e.values), st, err)
		}
	}
	evAddr, evMetrics, evDir := freeAddr(t), freeAddr(t), filepath.Join(e.dir, "ev")
	ev := newProc(t, e.dir, "events", "events", "--id", "ev", "--addr", evAddr, "--data-dir", evDir,
		"--topics", tierTopic, "--metrics-addr", evMetrics)
	ev.start()
	player := newProc(t, e.dir, "player", "player", "--id", "tier-player", "--store", e.api,
		"--target", fmt.Sprintf("ev=%s/%s", evAddr, tierTopic), "--metrics-addr", freeAddr(t))
	player.start()
	e.write(20) // the tail, delivered live
	want := float64(len(e.values))
	testwait.ForErr(t, progressMax, fmt.Sprintf("the new target applying lsn %v", want), func() error {
		samples, err := scrape(evMetrics, "target_applied_lsn")
		if err == nil && (len(samples) != 1 || samples[0].value != want) {
			err = fmt.Errorf("target_applied_lsn samples %v", samples)
		}
		return err
	})
	player.terminate()
	ev.terminate()
	events, st, err := demo.ReadEventLog(filepath.Join(evDir, demo.EventLogFileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(e.values) {
		t.Fatalf("the target holds %d events, the log %d messages", len(events), len(e.values))
	}
	for i, ev := range events {
		if ev.Topic != tierTopic || ev.Offset != types.Offset(i) || ev.LSN != types.LSN(i+1) || string(ev.Message.Value) != e.values[i] {
			t.Fatalf("event %d: topic %s offset %d lsn %d %.20q; want offset %d lsn %d %.20q",
				i, ev.Topic, ev.Offset, ev.LSN, ev.Message.Value, i, i+1, e.values[i])
		}
	}
	if st.AppliedLSN != types.LSN(len(e.values)) {
		t.Fatalf("target state applied lsn %d, want %d", st.AppliedLSN, len(e.values))
	}
	if v := e.metric("logstore_tier_reads_total"); v == 0 {
		t.Fatal("the catch-up read nothing from the tier")
	}
	for _, p := range []*proc{e.store, ev, player} {
		p.checkLog()
	}
}
