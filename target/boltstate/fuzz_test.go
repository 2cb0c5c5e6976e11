package boltstate_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/target/boltstate"
)

var errRollback = errors.New("roll back")

// FuzzLoad: whatever bytes the State's keys hold, Load returns a
// *FormatError naming the key or a State that Save writes back to the
// same State.
func FuzzLoad(f *testing.F) {
	f.Add(u64(3), u64(1), []byte("c1"), []byte("i1"), "orders", u64(7))
	f.Add([]byte{1, 2}, []byte{}, []byte{0xff}, []byte(nil), "", []byte{9})
	db, _, err := testLayout.Open(filepath.Join(f.TempDir(), "t.db"), time.Second)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	f.Fuzz(func(t *testing.T, lsn, epoch, cluster, inc []byte, topic string, offset []byte) {
		err := db.Update(func(tx *bbolt.Tx) error {
			meta, offsets := tx.Bucket(boltstate.BucketMeta), tx.Bucket(boltstate.BucketOffsets)
			for k, v := range map[string][]byte{"applied_lsn": lsn, "epoch": epoch, "log_cluster_id": cluster, "log_incarnation": inc} {
				if v != nil {
					if err := meta.Put([]byte(k), v); err != nil {
						return err
					}
				}
			}
			if topic != "" && len(topic) <= bbolt.MaxKeySize {
				if err := offsets.Put([]byte(topic), offset); err != nil {
					return err
				}
			}
			st, err := testLayout.Load(tx)
			if err != nil {
				var fe *boltstate.FormatError
				if !errors.As(err, &fe) || fe.Key == "" {
					t.Fatalf("Load: %v, want a *FormatError naming a key", err)
				}
				return errRollback
			}
			empty := st.Clone()
			empty.AppliedLSN, empty.Epoch, empty.LogClusterID, empty.LogIncarnation = 0, 0, "", ""
			clear(empty.Topics)
			if err := tx.DeleteBucket(boltstate.BucketOffsets); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(boltstate.BucketOffsets); err != nil {
				return err
			}
			for _, k := range [][]byte{boltstate.KeyAppliedLSN, boltstate.KeyEpoch, boltstate.KeyLogClusterID, boltstate.KeyLogIncarnation} {
				if err := meta.Delete(k); err != nil {
					return err
				}
			}
			if err := boltstate.Save(tx, empty, st); err != nil {
				t.Fatalf("Save of a loaded State %+v: %v", st, err)
			}
			again, err := testLayout.Load(tx)
			if err != nil || !sameState(again, st) {
				t.Fatalf("Load after Save: %+v, %v; want %+v", again, err, st)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
	})
}
