package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/target"
)

// Snapshot and restore of a shard (target.Snapshotter; issue #29).
//
// A snapshot is the whole bbolt file as one read transaction sees it
// (bbolt's Tx.WriteTo): data, offsets and meta together, so the State in
// it is exactly the one its data is consistent with.
//
// A restore streams the file into StagingFileName next to the shard's file
// (first removing what an interrupted restore left there), fsyncs it,
// opens it to check its format and that its State is the one the header
// announced, then copies its buckets into the live file in ONE bbolt
// transaction (the atomic switch): a crash before that commit leaves the
// shard empty as it was, one after leaves it restored. The live file is
// never closed or replaced, so concurrent reads (Get, Scan, Snapshot) see
// either the empty shard or the restored one.

// SnapshotFormat is the format of a shard's snapshots: a bbolt file of
// layout formatVersion.
const SnapshotFormat = "shard/bbolt/1"

// StagingFileName is the file inside Config.Dir a restore streams into
// before the switch; it exists only while a restore runs (or after one
// was interrupted, until the next restore removes it).
const StagingFileName = "shard.db.restore"

var _ target.Snapshotter = (*store)(nil)

// SnapshotFormat implements target.Snapshotter.
func (s *store) SnapshotFormat() string { return SnapshotFormat }

// Snapshot implements target.Snapshotter: one read transaction's copy of
// the bbolt file.
func (s *store) Snapshot(ctx context.Context, begin func(target.State) (io.Writer, error)) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		st, err := readState(tx)
		if err != nil {
			return err
		}
		w, err := begin(st)
		if err != nil {
			return err
		}
		_, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
}

// ctxWriter stops a long copy when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// Restore implements target.Snapshotter (see the file comment).
func (s *store) Restore(ctx context.Context, st target.State, r io.Reader) (target.State, error) {
	if err := s.checkEmpty(); err != nil {
		return target.State{}, err
	}
	dir := filepath.Dir(s.db.Path())
	staging := filepath.Join(dir, StagingFileName)
	if err := os.Remove(staging); err != nil && !errors.Is(err, os.ErrNotExist) {
		return target.State{}, fmt.Errorf("shard: discard the earlier staged restore: %w", err)
	}
	defer os.Remove(staging) // after the switch, or after a failure: never read again
	if err := writeStaging(staging, r); err != nil {
		return target.State{}, err
	}
	staged, err := bbolt.Open(staging, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return target.State{}, fmt.Errorf("%w: the snapshot is not a bbolt file: %v", target.ErrSnapshotMismatch, err)
	}
	defer staged.Close()
	var got target.State
	err = staged.View(func(stx *bbolt.Tx) error {
		if err := checkLayout(stx); err != nil {
			return err
		}
		if got, err = readState(stx); err != nil {
			return fmt.Errorf("%w: %v", target.ErrSnapshotMismatch, err)
		}
		if !target.SameData(got, st) {
			return fmt.Errorf("%w: the snapshot holds lsn %d topics %v log %s/%s, its header said lsn %d topics %v log %s/%s",
				target.ErrSnapshotMismatch, got.AppliedLSN, got.Topics, got.LogClusterID, got.LogIncarnation,
				st.AppliedLSN, st.Topics, st.LogClusterID, st.LogIncarnation)
		}
		for topic := range got.Topics {
			if !slices.Contains(s.topics, topic) {
				return fmt.Errorf("%w: the snapshot holds topic %q, this shard owns %v", target.ErrSnapshotMismatch, topic, s.topics)
			}
		}
		got.Epoch = st.Epoch
		return s.db.Update(func(tx *bbolt.Tx) error { return switchTo(tx, stx, got) })
	})
	if err != nil {
		return target.State{}, err
	}
	s.written = got
	s.publish(got.AppliedLSN)
	return got, nil
}

// checkEmpty refuses a restore into a shard with an applied LSN, topics or
// data (target.ErrNotEmpty).
func (s *store) checkEmpty() error {
	return s.db.View(func(tx *bbolt.Tx) error {
		st, err := readState(tx)
		if err != nil {
			return err
		}
		k, _ := tx.Bucket(bucketData).Cursor().First()
		if st.AppliedLSN != 0 || len(st.Topics) != 0 || k != nil {
			return fmt.Errorf("%w: the shard holds applied lsn %d, topics %v, data: %v", target.ErrNotEmpty,
				st.AppliedLSN, st.Topics, k != nil)
		}
		return nil
	})
}

// writeStaging copies r (to its io.EOF) into a new file at path and fsyncs
// it; on an error the file is left for the caller's removal.
func writeStaging(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("shard: stage the restore: %w", err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("shard: stage the restore: %w", err)
	}
	return nil
}

// checkLayout checks a staged file's buckets and format.
func checkLayout(tx *bbolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil || tx.Bucket(bucketOffsets) == nil || tx.Bucket(bucketData) == nil {
		return fmt.Errorf("%w: the snapshot lacks the shard's buckets", target.ErrSnapshotMismatch)
	}
	var v uint64
	if err := readU64(meta, keyFormat, &v); err != nil || v != formatVersion {
		return fmt.Errorf("%w: the snapshot's layout is format %d (%v), this build reads %d",
			target.ErrSnapshotMismatch, v, err, formatVersion)
	}
	return nil
}

// switchTo replaces the live file's buckets with the staged ones and
// stores st's epoch: the restore's one transaction.
func switchTo(tx, staged *bbolt.Tx, st target.State) error {
	for _, name := range [][]byte{bucketMeta, bucketOffsets, bucketData} {
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
		dst, err := tx.CreateBucket(name)
		if err != nil {
			return err
		}
		dst.FillPercent = 0.9 // keys arrive in order: pack the pages
		if err := staged.Bucket(name).ForEach(dst.Put); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyEpoch, u64(st.Epoch))
}
