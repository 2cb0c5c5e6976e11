package boltstate_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/boltstate"
	"github.com/logplayer/logplayer/types"
)

var errTestKind = errors.New("test: not a test file")

var testLayout = boltstate.Layout{Format: []byte("test/1"), Buckets: [][]byte{[]byte("data")}, Kind: errTestKind}

func sameState(a, b target.State) bool {
	return a.AppliedLSN == b.AppliedLSN && a.Epoch == b.Epoch && maps.Equal(a.Topics, b.Topics) &&
		a.LogClusterID == b.LogClusterID && a.LogIncarnation == b.LogIncarnation
}

// writeRaw writes a bbolt file at path holding exactly the given buckets
// and key-values, byte for byte.
func writeRaw(t *testing.T, path string, buckets map[string]map[string][]byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for name, kvs := range buckets {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range kvs {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func u64(v uint64) []byte { return boltstate.U64(v) }

// TestLoadsDocumentedBytes: a file written key by key in the layout of
// the package comment (the one the shard and the event log wrote before
// this package) loads as its State, through Open and Load.
func TestLoadsDocumentedBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string][]byte
		want target.State
	}{{
		name: "identity",
		meta: map[string][]byte{"format": []byte("test/1"), "applied_lsn": u64(300), "epoch": u64(4),
			"log_cluster_id": []byte("6c6f67706c617931"), "log_incarnation": []byte("0000000000000007")},
		want: target.State{AppliedLSN: 300, Epoch: 4, LogClusterID: "6c6f67706c617931", LogIncarnation: "0000000000000007"},
	}, {
		name: "no identity", // written before identities existed
		meta: map[string][]byte{"format": []byte("test/1"), "applied_lsn": u64(300), "epoch": u64(4)},
		want: target.State{AppliedLSN: 300, Epoch: 4},
	}, {
		name: "empty identity values", // how the shard stored an empty identity
		meta: map[string][]byte{"format": []byte("test/1"), "applied_lsn": u64(300), "epoch": u64(4),
			"log_cluster_id": {}, "log_incarnation": {}},
		want: target.State{AppliedLSN: 300, Epoch: 4},
	}, {
		name: "new", // nothing applied yet
		meta: map[string][]byte{"format": []byte("test/1")},
		want: target.State{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			offsets := map[string][]byte{}
			tc.want.Topics = map[string]types.Offset{}
			if tc.want.AppliedLSN != 0 {
				offsets = map[string][]byte{"orders": u64(7), "inventory": u64(1 << 40)}
				tc.want.Topics = map[string]types.Offset{"orders": 7, "inventory": 1 << 40}
			}
			writeRaw(t, path, map[string]map[string][]byte{"meta": tc.meta, "offsets": offsets,
				"data": {"k": []byte("v")}})
			db, st, err := testLayout.Open(path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if !sameState(st, tc.want) {
				t.Fatalf("Open: State %+v, want %+v", st, tc.want)
			}
			if err := db.View(func(tx *bbolt.Tx) error {
				st, err := testLayout.Load(tx)
				if err == nil && !sameState(st, tc.want) {
					t.Errorf("Load: State %+v, want %+v", st, tc.want)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSaveRoundTrip: States saved across reopens load back as saved; an
// identity set back to empty removes its keys.
func TestSaveRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	states := []target.State{
		{Epoch: 1, Topics: map[string]types.Offset{}},
		{Epoch: 1, LogClusterID: "c1", LogIncarnation: "i1", Topics: map[string]types.Offset{}},
		{AppliedLSN: 5, Epoch: 1, LogClusterID: "c1", LogIncarnation: "i1", Topics: map[string]types.Offset{"a": 2}},
		{AppliedLSN: 9, Epoch: 2, LogClusterID: "c1", LogIncarnation: "i1", Topics: map[string]types.Offset{"a": 2, "b": 3}},
		{AppliedLSN: 9, Epoch: 2, Topics: map[string]types.Offset{"a": 2, "b": 3}}, // operator reset to none
	}
	prev := target.State{Topics: map[string]types.Offset{}}
	for i, next := range states {
		db, st, err := testLayout.Open(path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !sameState(st, prev) {
			t.Fatalf("step %d: reopened State %+v, want %+v", i, st, prev)
		}
		err = db.Update(func(tx *bbolt.Tx) error { return boltstate.Save(tx, st, next) })
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	db, err := testLayout.OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bbolt.Tx) error {
		for _, k := range [][]byte{boltstate.KeyLogClusterID, boltstate.KeyLogIncarnation} {
			if v := tx.Bucket(boltstate.BucketMeta).Get(k); v != nil {
				t.Errorf("meta/%s = %q after an empty identity was saved, want no key", k, v)
			}
		}
		return nil
	})
}

// TestSaveRefuses: a log identity longer than any log's is refused with
// nothing written; a State going backwards panics.
func TestSaveRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, st, err := testLayout.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	long := st.Clone()
	long.LogIncarnation = strings.Repeat("x", boltstate.MaxLogIdentityBytes+1)
	if err := db.Update(func(tx *bbolt.Tx) error { return boltstate.Save(tx, st, long) }); err == nil ||
		!strings.Contains(err.Error(), "log_incarnation of 257 bytes") {
		t.Fatalf("Save of a %d-byte incarnation: %v, want refused", len(long.LogIncarnation), err)
	}
	next := target.State{AppliedLSN: 3, Epoch: 2, Topics: map[string]types.Offset{}}
	if err := db.Update(func(tx *bbolt.Tx) error { return boltstate.Save(tx, st, next) }); err != nil {
		t.Fatal(err)
	}
	back := next.Clone()
	back.AppliedLSN = 2
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "lsn 3 -> 2") {
				t.Errorf("Save going backwards: panic %v, want one naming lsn 3 -> 2", r)
			}
		}()
		_ = db.Update(func(tx *bbolt.Tx) error { return boltstate.Save(tx, next, back) })
	}()
}

// TestRefusesForeignAndDamagedFiles: each file that is not of the layout
// is refused by Open and OpenReadOnly with a *FormatError naming the file
// and the key, wrapping ErrFormat and the layout's Kind, and is left as it
// was.
func TestRefusesForeignAndDamagedFiles(t *testing.T) {
	good := func() map[string]map[string][]byte {
		return map[string]map[string][]byte{
			"meta":    {"format": []byte("test/1"), "applied_lsn": u64(3), "epoch": u64(1)},
			"offsets": {"orders": u64(2)},
			"data":    {},
		}
	}
	for _, tc := range []struct {
		name    string
		change  func(map[string]map[string][]byte)
		garbage bool
		key     string
	}{
		{name: "not bbolt", garbage: true, key: ""},
		{name: "other application", change: func(f map[string]map[string][]byte) { delete(f, "meta"); delete(f, "offsets") }, key: "meta"},
		{name: "other format", change: func(f map[string]map[string][]byte) { f["meta"]["format"] = u64(1) }, key: "meta/format"},
		{name: "no format", change: func(f map[string]map[string][]byte) { delete(f["meta"], "format") }, key: "meta/format"},
		{name: "no offsets", change: func(f map[string]map[string][]byte) { delete(f, "offsets") }, key: "offsets"},
		{name: "no data", change: func(f map[string]map[string][]byte) { delete(f, "data") }, key: "data"},
		{name: "short lsn", change: func(f map[string]map[string][]byte) { f["meta"]["applied_lsn"] = []byte{1, 2, 3} }, key: "meta/applied_lsn"},
		{name: "short epoch", change: func(f map[string]map[string][]byte) { f["meta"]["epoch"] = []byte{1} }, key: "meta/epoch"},
		{name: "long identity", change: func(f map[string]map[string][]byte) {
			f["meta"]["log_cluster_id"] = bytes.Repeat([]byte("c"), boltstate.MaxLogIdentityBytes+1)
		}, key: "meta/log_cluster_id"},
		{name: "binary identity", change: func(f map[string]map[string][]byte) { f["meta"]["log_incarnation"] = []byte{0xff, 0xfe} }, key: "meta/log_incarnation"},
		{name: "short offset", change: func(f map[string]map[string][]byte) { f["offsets"]["orders"] = []byte{2} }, key: "offsets/orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			if tc.garbage {
				if err := os.WriteFile(path, bytes.Repeat([]byte("not a bbolt file "), 1000), 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				f := good()
				tc.change(f)
				writeRaw(t, path, f)
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			db, _, err := testLayout.Open(path, time.Second)
			if db != nil {
				db.Close()
			}
			wantFormatError(t, "Open", err, path, tc.key)
			db, err = testLayout.OpenReadOnly(path, time.Second)
			if db != nil {
				if tc.key == "meta/applied_lsn" || tc.key == "meta/epoch" || strings.HasPrefix(tc.key, "offsets/") ||
					strings.HasPrefix(tc.key, "meta/log_") {
					// OpenReadOnly checks the layout only; Load finds the damaged value.
					err = db.View(func(tx *bbolt.Tx) error { _, err := testLayout.Load(tx); return err })
				}
				db.Close()
			}
			wantFormatError(t, "OpenReadOnly", err, path, tc.key)
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("the refused file was changed")
			}
		})
	}
}

func wantFormatError(t *testing.T, what string, err error, path, key string) {
	t.Helper()
	var fe *boltstate.FormatError
	if !errors.As(err, &fe) || !errors.Is(err, boltstate.ErrFormat) || !errors.Is(err, errTestKind) {
		t.Fatalf("%s: %v, want a *FormatError wrapping ErrFormat and the layout's Kind", what, err)
	}
	if fe.File != path || fe.Key != key {
		t.Fatalf("%s: %v names file %q key %q, want %q %q", what, err, fe.File, fe.Key, path, key)
	}
}
