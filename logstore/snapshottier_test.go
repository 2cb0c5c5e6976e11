package logstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/testmetric"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/tier"
)

// TestSnapshotWaitsForTier: with tiered storage and the object store down,
// the snapshot store reaps no snapshot (more than SnapshotRetain pile up);
// once the store answers, the newest snapshot is uploaded, its objects'
// SHA-256 match the local files, and reap brings the store back to
// SnapshotRetain.
func TestSnapshotWaitsForTier(t *testing.T) {
	srv, down, backend := downS3(t)
	reg := prometheus.NewRegistry()
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.Registry = reg
		cfg.SegmentBytes = 16 << 10
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 8, 20*time.Millisecond
		cfg.Tier = &tier.Config{URL: "s3://logs/node", Endpoint: srv.URL, ScanInterval: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond}
	})
	cl := newClient(t, c.addrs()...)
	n := c.Nodes[0]
	deadline := time.Now().Add(60 * time.Second)
	for len(logstore.SnapshotIDsForTest(n)) <= logstore.DefaultSnapshotRetain+1 {
		if time.Now().After(deadline) {
			t.Fatalf("tier down: %d snapshots kept, want more than %d (reaped before upload)",
				len(logstore.SnapshotIDsForTest(n)), logstore.DefaultSnapshotRetain+1)
		}
		loadPastBudget(t, cl, n, 400)
	}
	if v := testmetric.Value(t, reg, "logstore_tier_uploaded_snapshots_total", nil); v != 0 {
		t.Fatalf("uploaded snapshots %v with the tier down", v)
	}
	down.Store(false)
	testwait.For(t, 60*time.Second, "snapshot uploaded and older ones reaped", func() bool {
		return testmetric.Value(t, reg, "logstore_tier_uploaded_snapshots_total", nil) > 0 &&
			len(logstore.SnapshotIDsForTest(n)) <= logstore.DefaultSnapshotRetain
	})
	checked := 0
	for _, id := range logstore.SnapshotIDsForTest(n) {
		b, ok := s3Object(t, backend, "node/snapshots/"+id+"/upload.json")
		if !ok {
			continue
		}
		var m tier.SnapshotManifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Files) != 3 {
			t.Fatalf("snapshot %s: uploaded %d files, want meta.json, state.bin, manifest.json", id, len(m.Files))
		}
		for _, f := range m.Files {
			local, err := os.ReadFile(filepath.Join(c.Configs[0].Dir, "snapshots", id, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			obj, ok := s3Object(t, backend, "node/snapshots/"+id+"/"+f.Name)
			if !ok {
				t.Fatalf("snapshot %s: manifest names %s, no object", id, f.Name)
			}
			if sum(local) != sum(obj) || sum(obj) != f.SHA256 || int64(len(obj)) != f.Bytes {
				t.Fatalf("snapshot %s %s: local sha256 %s, object %s (%d bytes), manifest %s (%d bytes)",
					id, f.Name, sum(local), sum(obj), len(obj), f.SHA256, f.Bytes)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no kept snapshot is in the tier")
	}
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// s3Object reads an object of bucket "logs"; false when there is none.
func s3Object(t *testing.T, backend *s3mem.Backend, key string) ([]byte, bool) {
	t.Helper()
	obj, err := backend.GetObject("logs", key, nil)
	if err != nil {
		return nil, false
	}
	defer obj.Contents.Close()
	b, err := io.ReadAll(obj.Contents)
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}
