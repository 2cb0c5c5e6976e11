package logstore_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// saveBackup writes a backup of the cluster behind cl to path.
func saveBackup(t *testing.T, addrs []string, path string) logstore.BackupInfo {
	t.Helper()
	cl := newClient(t, addrs...)
	var buf bytes.Buffer
	var bw *logstore.BackupWriter
	var info logstore.BackupInfo
	err := cl.Backup(ctxT(t, 60*time.Second), func(bi *logstorepb.BackupInfo) (io.Writer, error) {
		buf.Reset()
		info = logstore.BackupInfo{RaftIndex: bi.RaftIndex, RaftTerm: bi.RaftTerm, FirstLSN: types.LSN(bi.FirstLsn),
			LastLSN: types.LSN(bi.LastLsn), ArchiveBytes: int64(bi.ArchiveBytes)}
		var err error
		bw, err = logstore.NewBackupWriter(&buf, info)
		return bw, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return info
}

// TestBackupUnderLoadRestoreNewCluster backs a cluster up while it takes
// writes, restores the file into a new 3-node cluster and checks the log
// (every transaction, LSN, offset) and the offsets up to the backup's LSN,
// then keeps appending to the restored cluster.
func TestBackupUnderLoadRestoreNewCluster(t *testing.T) {
	src := startCluster(t, 3, allowLegacyProducers) // prod-1 below
	cl := newClient(t, src.addrs()...)
	ctx := ctxT(t, 120*time.Second)
	req := txnReq("commit", "b")
	req.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g1", Topic: "a", Offset: 10}, {Group: "g2", Topic: "b", Offset: 7}}
	if _, err := cl.Append(ctx, req); err != nil {
		t.Fatal(err)
	}
	preq := txnReq("produced", "p")
	preq.ProducerId, preq.Sequence = "prod-1", 1
	presp, err := cl.Append(ctx, preq)
	if err != nil {
		t.Fatal(err)
	}
	first := appendLoad(t, cl, 4, 20, "pre")
	var wg sync.WaitGroup
	var during []ack
	wg.Add(1)
	go func() { defer wg.Done(); during = appendLoad(t, cl, 4, 30, "during") }()
	path := filepath.Join(t.TempDir(), "backup.lpb")
	info := saveBackup(t, src.addrs(), path)
	wg.Wait()
	if info.LastLSN < types.LSN(maxLSN(first)) {
		t.Fatalf("backup at lsn %d, before the acknowledged lsn %d", info.LastLSN, maxLSN(first))
	}
	want := readAll(t, src.addrs()[0], uint64(info.LastLSN))

	dst := startCluster(t, 3, func(cfg *logstore.Config) {
		if _, err := logstore.RestoreBackup(path, cfg.Dir, cfg.Bootstrap); err != nil {
			t.Fatal(err)
		}
	})
	for _, addr := range dst.addrs() {
		got := readAll(t, addr, uint64(info.LastLSN))
		if len(got) != len(want) {
			t.Fatalf("%s: %d txns, source has %d up to lsn %d", addr, len(got), len(want), info.LastLSN)
		}
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("%s: lsn %d = %v, source %v", addr, want[i].Lsn, got[i], want[i])
			}
		}
	}
	dcl := newClient(t, dst.addrs()...)
	for g, w := range map[string]uint64{"g1": 10, "g2": 7} {
		got, err := dcl.FetchOffsets(ctx, g)
		if err != nil || len(got) != 1 || got[0].Offset != w {
			t.Fatalf("restored offsets of %s = %v (%v), want %d", g, got, err, w)
		}
	}
	// The producer table came along: a retry of the sequence is a duplicate
	// answered with the first result, the next sequence is accepted.
	if dup, err := dcl.Append(ctx, preq); err != nil || !dup.Duplicate || dup.Lsn != presp.Lsn {
		t.Fatalf("producer retry on the restored cluster = %v (%v), want duplicate of lsn %d", dup, err, presp.Lsn)
	}
	var acked []ack
	for _, a := range append(first, during...) {
		if a.resp.Lsn <= uint64(info.LastLSN) {
			acked = append(acked, a)
		}
	}
	after := appendLoad(t, dcl, 4, 10, "after")
	if min := maxLSN(after); min <= uint64(info.LastLSN) {
		t.Fatalf("restored cluster acked lsn %d, not after the backup's %d", min, info.LastLSN)
	}
	checkLog(t, readAll(t, dst.addrs()[1], maxLSN(after)), append(acked, after...))
}

// TestBackupCorruptOrTruncatedIsRefused: a flipped byte anywhere or a
// missing tail is refused before the data directory is touched.
func TestBackupCorruptOrTruncatedIsRefused(t *testing.T) {
	src := startCluster(t, 1, nil)
	cl := newClient(t, src.addrs()...)
	appendLoad(t, cl, 2, 10, "x")
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.lpb")
	saveBackup(t, src.addrs(), path)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := logstore.VerifyBackup(path); err != nil {
		t.Fatalf("good backup refused: %v", err)
	}
	voters := []logstore.Peer{{ID: "n0", RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"}}
	for name, b := range map[string][]byte{
		"truncated":       good[:len(good)-100],
		"header only":     good[:30],
		"flipped segment": flip(good, len(good)-50),
		"flipped header":  flip(good, 20),
		"flipped state":   flip(good, 70),
		"flipped trailer": flip(good, len(good)-1),
	} {
		bad := filepath.Join(dir, "bad.lpb")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data-"+name)
		if _, err := logstore.RestoreBackup(bad, data, voters); !errors.Is(err, logstore.ErrBadBackup) {
			t.Fatalf("%s: restore = %v, want ErrBadBackup", name, err)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: restore wrote %s (%v)", name, data, err)
		}
	}
	if _, err := logstore.RestoreBackup(path, dir, voters); !errors.Is(err, logstore.ErrDataDirNotEmpty) {
		t.Fatalf("restore into a non-empty dir = %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}
