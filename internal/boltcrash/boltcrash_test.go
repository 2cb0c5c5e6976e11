package boltcrash

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

var bucket = []byte("b")

// commit is the file after one bbolt commit and what it holds.
type commit struct {
	file []byte
	txid int
	data map[string]string
}

// record makes a bbolt file with opts and commits n transactions of puts
// and deletes of 48 keys (values of 300 bytes, so that a commit spans
// several pages and the file grows), returning the file after each commit
// (the first: after the bucket's creation) and the page size.
func record(t *testing.T, opts *bbolt.Options, n int) ([]commit, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rec.db")
	db, err := bbolt.Open(path, 0o600, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	data := map[string]string{}
	var out []commit
	for i := range n + 1 {
		err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucket)
			if err != nil || i == 0 {
				return err
			}
			for range 1 + rng.IntN(6) {
				k := fmt.Sprintf("k%02d", rng.IntN(48))
				if rng.IntN(5) == 0 {
					delete(data, k)
					if err := b.Delete([]byte(k)); err != nil {
						return err
					}
					continue
				}
				v := fmt.Sprintf("%d:%s", i, bytes.Repeat([]byte{'a' + byte(i%26)}, 300))
				data[k] = v
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var txid int
		if err := db.View(func(tx *bbolt.Tx) error { txid = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		out = append(out, commit{file: file, txid: txid, data: maps.Clone(data)})
	}
	return out, db.Info().PageSize
}

// open opens img as bbolt would after the power loss and returns the
// transaction id it opened at and its data, after bbolt's consistency
// check of the whole file (tx.Check: every page reachable once, none both
// used and free).
func open(t *testing.T, where string, img []byte, opts *bbolt.Options) (int, map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crash.db")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, opts)
	if err != nil {
		t.Fatalf("%s: open: %v", where, err)
	}
	defer db.Close()
	var txid int
	data := map[string]string{}
	err = db.View(func(tx *bbolt.Tx) error {
		txid = tx.ID()
		for err := range tx.Check() {
			return fmt.Errorf("check: %w", err)
		}
		b := tx.Bucket(bucket)
		if b == nil {
			return fmt.Errorf("no bucket %q", bucket)
		}
		return b.ForEach(func(k, v []byte) error { data[string(k)] = string(v); return nil })
	})
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return txid, data
}

// options are the two freelist setups: the shard's and the EventLog's (no
// freelist page, rebuilt on open) and bbolt's default (a freelist page in
// every commit).
var options = map[string]*bbolt.Options{
	"NoFreelistSync": {NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	"default":        {},
}

// TestImage builds images between consecutive commits for many seeds:
// each opens in bbolt, passes its consistency check, at exactly one of the
// two commits with exactly that commit's data (DataPagesOnly at the old,
// WholeCommit at the new, which is the new file itself), and every page of
// an image is the old page or the new one (a meta page of TornMeta: a
// prefix of the new over the old). Over the seeds every shape occurs, a
// DataPagesOnly image with some but not all new data pages, and TornMeta
// images that open at the old commit and at the new one.
func TestImage(t *testing.T) {
	for name, opts := range options {
		t.Run(name, func(t *testing.T) {
			commits, pageSize := record(t, opts, 40)
			files := make([][]byte, len(commits))
			for i, c := range commits {
				files[i] = c.file
			}
			opened := map[string]map[string]int{} // shape -> "old"/"new"/"partial" -> count
			for seed := range uint64(300) {
				rng := rand.New(rand.NewPCG(seed, 0xc0de))
				k, img, shape := Between(rng, files, pageSize)
				old, new := commits[k], commits[k+1]
				where := fmt.Sprintf("seed %d, %s between txids %d and %d", seed, shape, old.txid, new.txid)
				if len(img) != len(new.file) {
					t.Fatalf("%s: image of %d bytes, want the new file's %d", where, len(img), len(new.file))
				}
				// The old file as the grown file holds it: zeros past its end.
				oldFile := append(bytes.Clone(old.file), make([]byte, max(0, len(new.file)-len(old.file)))...)
				var dataNew, dataDiff int
				for p := 0; p*pageSize < len(img); p++ {
					ip, op, np := page(img, p, pageSize), page(oldFile, p, pageSize), page(new.file, p, pageSize)
					isOld, isNew := bytes.Equal(ip, op), bytes.Equal(ip, np)
					if p >= 2 && !bytes.Equal(op, np) {
						dataDiff++
						if isNew {
							dataNew++
						}
					}
					switch {
					case isOld || isNew:
					case p < 2 && shape == TornMeta && torn(ip, op, np):
					default:
						t.Fatalf("%s: page %d is neither the old page nor the new one", where, p)
					}
					if p < 2 && shape == DataPagesOnly && !isOld {
						t.Fatalf("%s: meta page %d is not the old one", where, p)
					}
					if p >= 2 && shape == TornMeta && !isNew {
						t.Fatalf("%s: data page %d is not the new one", where, p)
					}
				}
				if shape == WholeCommit && !bytes.Equal(img, new.file) {
					t.Fatalf("%s: not the new file", where)
				}
				rng = rand.New(rand.NewPCG(seed, 0xc0de))
				rng.IntN(len(commits) - 1)
				if again, shape2 := Image(rng, old.file, new.file, pageSize); shape2 != shape || !bytes.Equal(again, img) {
					t.Fatalf("%s: the same seed gave %s, another image", where, shape2)
				}
				txid, data := open(t, where, img, opts)
				at := "old"
				switch {
				case txid == old.txid && maps.Equal(data, old.data):
				case txid == new.txid && maps.Equal(data, new.data):
					at = "new"
				default:
					t.Fatalf("%s: opened at txid %d with %d keys, which is neither commit's data", where, txid, len(data))
				}
				if shape == DataPagesOnly && at != "old" || shape == WholeCommit && at != "new" {
					t.Fatalf("%s: opened at the %s commit", where, at)
				}
				if opened[shape] == nil {
					opened[shape] = map[string]int{}
				}
				opened[shape][at]++
				if shape == DataPagesOnly && dataNew > 0 && dataNew < dataDiff {
					opened[shape]["partial"]++
				}
			}
			t.Logf("opened: %v", opened)
			if opened[DataPagesOnly]["partial"] == 0 || opened[WholeCommit]["new"] == 0 ||
				opened[TornMeta]["old"] == 0 || opened[TornMeta]["new"] == 0 {
				t.Fatalf("the seeds do not cover the shapes: %v", opened)
			}
		})
	}
}

// torn reports whether the meta page img is a prefix of np over op.
func torn(img, op, np []byte) bool {
	for n := range len(img) + 1 {
		if bytes.Equal(img[:n], np[:n]) && bytes.Equal(img[n:], op[n:]) {
			return true
		}
	}
	return false
}

// TestOldMetaKeepsOldData checks the assumption DataPagesOnly rests on:
// bbolt writes a commit's data pages only to pages the last committed tree
// does not use, so every data page of the new commit under the old meta
// pages (the largest DataPagesOnly image) opens at the old commit with its
// data, for every pair of consecutive commits.
func TestOldMetaKeepsOldData(t *testing.T) {
	for name, opts := range options {
		t.Run(name, func(t *testing.T) {
			commits, pageSize := record(t, opts, 40)
			for k := range len(commits) - 1 {
				old, new := commits[k], commits[k+1]
				img := bytes.Clone(new.file)
				copy(img[:2*pageSize], old.file)
				txid, data := open(t, fmt.Sprintf("commit %d", k), img, opts)
				if txid != old.txid || !maps.Equal(data, old.data) {
					t.Fatalf("commit %d: the new data pages under the old meta pages open at txid %d with %d keys, want txid %d with %d",
						k, txid, len(data), old.txid, len(old.data))
				}
			}
		})
	}
}
