package shard_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
)

// TestSnapshotRestoreRPC: the Snapshot and Restore RPCs between two served
// shards. A Restore whose stream is cut after its first data chunk (the
// clone crashed) leaves the new shard empty; the rerun restores it; the
// LogPlayer's next Hello sees the sibling's applied LSN and the tail
// applies; a second Restore is refused with TARGET_NOT_EMPTY and a
// Snapshot for another id with WRONG_TARGET.
func TestSnapshotRestoreRPC(t *testing.T) {
	const topic = "s"
	a := start(t, shard.Config{Dir: t.TempDir(), ID: "a", Topics: []string{topic}})
	b := start(t, shard.Config{Dir: t.TempDir(), ID: "b", Topics: []string{topic}})
	sa, _ := a.open(t, "a", 1)
	log := targettest.NewLog()
	big := bytes.Repeat([]byte("v"), 8<<10)
	var ds []*targetpb.Delivery
	for i := range 40 { // ~2.6 MB: the snapshot spans several chunks
		var vals [][]byte
		for j := range 8 {
			vals = append(vals, shard.EncodePut(fmt.Appendf(nil, "k%03d", (i*8+j)%300), big))
		}
		ds = append(ds, log.Txn(targettest.Part{Topic: topic, Values: vals}))
	}
	if err := sa.Send(ds...); err != nil {
		t.Fatal(err)
	}
	if err := sa.WaitAck(ctxT(t), log.LSN()); err != nil {
		t.Fatal(err)
	}

	// The cut: header and one data chunk, then the clone dies.
	ctx, cancel := context.WithCancel(ctxT(t))
	halfRestore(t, ctx, a, b)
	cancel()
	// A Hello queues behind the interrupted restore on b's applier: it
	// sees what the restore left.
	_, ack := b.open(t, "b", 1)
	if ack.AppliedLsn != 0 || len(ack.Topics) != 0 {
		t.Fatalf("after a cut restore b says lsn %d topics %v, want empty", ack.AppliedLsn, ack.Topics)
	}

	st, n, err := target.CopySnapshot(ctxT(t), a.cc, "a", b.cc, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored %d bytes at lsn %d", n, st.AppliedLSN)
	if st.AppliedLSN != log.LSN() || n < 2<<20 {
		t.Fatalf("restored lsn %d (%d bytes), want lsn %d and more than 2 MiB", st.AppliedLSN, n, log.LSN())
	}
	_, _, err = target.CopySnapshot(ctxT(t), a.cc, "a", b.cc, "b", nil)
	if d := target.Detail(err); d == nil || d.Code != logstorepb.ErrorCode_TARGET_NOT_EMPTY || d.AppliedLsn != uint64(log.LSN()) {
		t.Fatalf("second restore: %v, want TARGET_NOT_EMPTY at lsn %d", err, log.LSN())
	}
	_, _, err = target.CopySnapshot(ctxT(t), a.cc, "b", b.cc, "b", nil)
	if d := target.Detail(err); d == nil || d.Code != logstorepb.ErrorCode_WRONG_TARGET {
		t.Fatalf("snapshot of the wrong id: %v, want WRONG_TARGET", err)
	}

	// The tail, delivered to both, leaves them equal.
	sb, ack := b.open(t, "b", 2)
	if ack.AppliedLsn != uint64(log.LSN()) {
		t.Fatalf("Hello after the restore: lsn %d, want %d", ack.AppliedLsn, log.LSN())
	}
	tail := log.Txn(targettest.Part{Topic: topic, Values: [][]byte{shard.EncodePut([]byte("tail"), []byte("t")), shard.EncodeDelete([]byte("k000"))}})
	for _, s := range []*targettest.Sender{sa, sb} {
		if err := s.Send(tail); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitAck(ctxT(t), log.LSN()); err != nil {
			t.Fatal(err)
		}
	}
	var scans [2]string
	for i, r := range []*running{a, b} {
		sc, err := shardpb.NewShardClient(r.cc).Scan(ctxT(t), &shardpb.ScanRequest{Limit: shard.MaxScanLimit})
		if err != nil {
			t.Fatal(err)
		}
		scans[i] = fmt.Sprintf("lsn %d: %d keys, %s", sc.AppliedLsn, len(sc.Items), kvString(sc.Items[:3]))
	}
	if scans[0] != scans[1] {
		t.Fatalf("after the tail the shards differ:\n a: %s\n b: %s", scans[0], scans[1])
	}
}

// TestStalledRestoreDoesNotHoldShutdown: a Restore whose client stalls
// mid-stream blocks the shard's applier; stopping the shard must still
// end it (the restore fails, nothing restored) instead of waiting for the
// client.
func TestStalledRestoreDoesNotHoldShutdown(t *testing.T) {
	const topic = "s"
	a := start(t, shard.Config{Dir: t.TempDir(), ID: "a", Topics: []string{topic}})
	dir := t.TempDir()
	b := start(t, shard.Config{Dir: dir, ID: "b", Topics: []string{topic}})
	dst := halfRestore(t, ctxT(t), a, b) // then silence
	// The restore is running on b's applier (a Hello queued behind it would
	// wait) once it has created its staging file.
	testwait.For(t, testwait.Max, "the restore writing its staging file", func() bool {
		_, err := os.Stat(filepath.Join(dir, shard.StagingFileName))
		return err == nil
	})
	stopped := make(chan struct{})
	go func() { b.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the shard did not stop within 10 s while a Restore stalled")
	}
	if _, err := dst.CloseAndRecv(); err == nil {
		t.Fatal("the stalled Restore succeeded")
	}
	_, st, err := shard.ReadDir(dir)
	if err != nil || st.AppliedLSN != 0 {
		t.Fatalf("after the stopped restore: State %+v, %v", st, err)
	}
}

// halfRestore starts a Restore of a's snapshot into b (ids "a", "b") and
// forwards only the header and the first data chunk.
func halfRestore(t *testing.T, ctx context.Context, a, b *running) targetpb.Target_RestoreClient {
	t.Helper()
	src, err := targetpb.NewTargetClient(a.cc).Snapshot(ctx, &targetpb.SnapshotRequest{TargetId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := targetpb.NewTargetClient(b.cc).Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c, err := src.Recv()
		if err != nil {
			t.Fatal(err)
		}
		req := &targetpb.RestoreRequest{Chunk: c}
		if i == 0 {
			req.TargetId = "b"
		}
		if err := dst.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
