package logstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
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

// segmentedBackup writes a backup of a one-node cluster holding several
// 4 KiB segments to backup.lpb in a new directory.
func segmentedBackup(t *testing.T) (dir, path string) {
	src := startCluster(t, 1, func(cfg *logstore.Config) { cfg.SegmentBytes = 4 << 10 })
	appendLoad(t, newClient(t, src.addrs()...), 2, 30, "m")
	dir = t.TempDir()
	path = filepath.Join(dir, "backup.lpb")
	saveBackup(t, src.addrs(), path)
	return dir, path
}

// TestRestoreCopiesWhatItVerified: a backup file that changes after
// RestoreBackup checked it (a segment byte flipped in place) is refused,
// and nothing is written.
func TestRestoreCopiesWhatItVerified(t *testing.T) {
	dir, path := segmentedBackup(t)
	logstore.SetRestoreHookForTest(t, func(p string) {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		var b [1]byte
		at := fi.Size() - 50 // in the last segment file
		if _, err := f.ReadAt(b[:], at); err != nil {
			t.Error(err)
		}
		b[0] ^= 0x40
		if _, err := f.WriteAt(b[:], at); err != nil {
			t.Error(err)
		}
	})
	data := filepath.Join(dir, "data")
	voters := []logstore.Peer{{ID: "n0", RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"}}
	if _, err := logstore.RestoreBackup(path, data, voters); !errors.Is(err, logstore.ErrBadBackup) {
		t.Fatalf("restore of a file changed after its check = %v, want ErrBadBackup", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("restore wrote %s (%v)", data, err)
	}
}

// rebuildBackup returns a backup of the archive of good with its manifest
// changed by edit: every checksum (segment files, archive, file) valid.
func rebuildBackup(t testing.TB, good []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	const headerSize = 8 + 4 + 5*8
	info, err := logstore.ParseBackupHeaderForTest(good[:headerSize])
	if err != nil {
		t.Fatal(err)
	}
	archive := good[headerSize : len(good)-4]
	r := bytes.NewReader(archive)
	st, mb, err := fsm.ReadArchiveHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	files := archive[len(archive)-r.Len():]
	m := decodeObject(t, mb)
	edit(m)
	mb2, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	state, err := fsm.MarshalState(st.ToProto())
	if err != nil {
		t.Fatal(err)
	}
	newArchive := append(fsm.ArchiveHeader(state, mb2), files...)
	info.ArchiveBytes = int64(len(newArchive))
	var buf bytes.Buffer
	bw, err := logstore.NewBackupWriter(&buf, info)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(newArchive); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRestoreRefusesMalformedManifest: a backup whose checksums are all
// valid but whose manifest is not a segment log's (a file name that leaves
// the directory, a sealed segment without its index, a gap in the LSNs) is
// refused by VerifyBackup and RestoreBackup, and nothing is written.
func TestRestoreRefusesMalformedManifest(t *testing.T) {
	dir, path := segmentedBackup(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	file := func(m map[string]any, i int) map[string]any { return m["files"].([]any)[i].(map[string]any) }
	voters := []logstore.Peer{{ID: "n0", RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"}}
	for name, edit := range map[string]func(m map[string]any){
		"name escapes": func(m map[string]any) { file(m, 0)["name"] = "../../escape.seg" },
		"index and segment swapped": func(m map[string]any) {
			a, b := file(m, 0)["name"], file(m, 1)["name"]
			file(m, 0)["name"], file(m, 1)["name"] = b, a
		},
		"gap": func(m map[string]any) {
			f := file(m, 2)
			n, _ := f["first_lsn"].(json.Number).Int64()
			f["first_lsn"] = n + 1
		},
	} {
		bad := filepath.Join(dir, "bad.lpb")
		if err := os.WriteFile(bad, rebuildBackup(t, good, edit), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := logstore.VerifyBackup(bad); !errors.Is(err, logstore.ErrBadBackup) {
			t.Errorf("%s: verify = %v, want ErrBadBackup", name, err)
		}
		data := filepath.Join(dir, "data-"+name)
		if _, err := logstore.RestoreBackup(bad, data, voters); !errors.Is(err, logstore.ErrBadBackup) {
			t.Errorf("%s: restore = %v, want ErrBadBackup", name, err)
		}
		if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: restore wrote %s (%v)", name, data, err)
		}
	}
}
