package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/boltstate"
	"github.com/logplayer/logplayer/types"
)

// FileName is the bbolt file inside Config.Dir.
const FileName = "shard.db"

// formatVersion is the on-disk layout below; stored in meta/format as 8
// bytes big-endian.
const formatVersion = 1

// On-disk layout (one bbolt file): the State in the layout of
// target/boltstate (meta/format = formatVersion, meta/applied_lsn,
// meta/epoch, meta/log_cluster_id, meta/log_incarnation, offsets/<topic>)
// and
//
//	data/<key>        value
//
// Invariant: one bbolt transaction (fsynced on commit) changes data and meta
// together, so the applied LSN and the data never disagree.
var (
	bucketMeta    = boltstate.BucketMeta
	bucketOffsets = boltstate.BucketOffsets
	bucketData    = []byte("data")
	keyFormat     = boltstate.KeyFormat
	keyApplied    = boltstate.KeyAppliedLSN
	keyEpoch      = boltstate.KeyEpoch
)

// stateLayout is the shard's kind of boltstate file.
var stateLayout = boltstate.Layout{Format: u64(uint64(formatVersion)), Buckets: [][]byte{bucketData}, Kind: ErrCorrupt}

// ErrCorrupt is wrapped by errors about a shard file this build cannot read.
var ErrCorrupt = errors.New("shard: corrupt or foreign file")

// store is the bbolt-backed target.Store of a shard, plus its reads.
type store struct {
	db     *bbolt.DB
	topics []string

	// written is the State of the last commit; applier goroutine only.
	written target.State

	mu struct {
		sync.Mutex
		applied types.LSN
		changed chan struct{} // closed and replaced at each commit that moves applied
	}
}

var _ target.Store = (*store)(nil)

func openStore(dir string, topics []string, lockWait time.Duration) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	db, st, err := stateLayout.Open(filepath.Join(dir, FileName), lockWait)
	if err != nil {
		return nil, err // names the file; a *boltstate.FormatError wraps ErrCorrupt
	}
	s := &store{db: db, topics: topics, written: st}
	s.mu.applied = st.AppliedLSN
	s.mu.changed = make(chan struct{})
	return s, nil
}

func (s *store) close() error { return s.db.Close() }

// State implements target.Store.
func (s *store) State() (target.State, error) {
	var st target.State
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		st, err = readState(tx)
		return err
	})
	return st, err
}

// readState checks the file's layout and reads its State.
func readState(tx *bbolt.Tx) (target.State, error) { return stateLayout.Load(tx) }

// Apply implements target.Store: the mutations of ds and next in one bbolt
// transaction. A malformed mutation fails it permanently, naming the LSN,
// before anything is written.
func (s *store) Apply(ds []*targetpb.Delivery, next target.State) error {
	muts, err := s.decode(ds)
	if err != nil {
		return err
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		data := tx.Bucket(bucketData)
		for _, m := range muts {
			var err error
			if m.Op == shardpb.Mutation_PUT {
				err = data.Put(m.Key, m.Value)
			} else {
				err = data.Delete(m.Key)
			}
			if err != nil {
				return err
			}
		}
		if err := boltstate.Save(tx, s.written, next); err != nil {
			return err
		}
		return failpoint.Inject(failpoint.ShardCommit)
	})
	if err != nil {
		return fmt.Errorf("shard: commit lsn %d: %w", next.AppliedLSN, err)
	}
	s.written = next
	s.publish(next.AppliedLSN)
	return nil
}

// decode decodes every message of ds; the first malformed one fails all.
func (s *store) decode(ds []*targetpb.Delivery) ([]*shardpb.Mutation, error) {
	var muts []*shardpb.Mutation
	for _, d := range ds {
		for _, sl := range d.Slices {
			if !slices.Contains(s.topics, sl.Topic) {
				return nil, target.Permanent(types.LSN(d.Lsn), fmt.Errorf("topic %q is not owned by this shard", sl.Topic))
			}
			for i, msg := range sl.Messages {
				m, err := DecodeMutation(msg.Value)
				if err != nil {
					return nil, target.Permanent(types.LSN(d.Lsn), fmt.Errorf("topic %q offset %d: %w", sl.Topic, sl.FirstOffset+uint64(i), err))
				}
				muts = append(muts, m)
			}
		}
	}
	return muts, nil
}

func (s *store) publish(lsn types.LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lsn > s.mu.applied {
		s.mu.applied = lsn
		close(s.mu.changed)
		s.mu.changed = make(chan struct{})
	}
}

// appliedLSN is the durable applied LSN.
func (s *store) appliedLSN() types.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.applied
}

// waitApplied waits until the applied LSN reaches lsn or ctx is done, and
// returns the applied LSN.
func (s *store) waitApplied(ctx context.Context, lsn types.LSN) (types.LSN, error) {
	for {
		s.mu.Lock()
		applied, changed := s.mu.applied, s.mu.changed
		s.mu.Unlock()
		if applied >= lsn {
			return applied, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return applied, ctx.Err()
		}
	}
}

// get returns key's value and the applied LSN it reflects (one read
// transaction).
func (s *store) get(key []byte) (value []byte, found bool, lsn types.LSN, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		if err = readU64(tx.Bucket(bucketMeta), keyApplied, &lsn); err != nil {
			return err
		}
		if v := tx.Bucket(bucketData).Get(key); v != nil {
			value, found = bytes.Clone(v), true
		}
		return nil
	})
	return value, found, lsn, err
}

// scan returns up to limit pairs whose key starts with prefix, in key order,
// whether more exist, and the applied LSN they reflect.
func (s *store) scan(prefix []byte, limit int) (kvs []*shardpb.KeyValue, truncated bool, lsn types.LSN, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		if err = readU64(tx.Bucket(bucketMeta), keyApplied, &lsn); err != nil {
			return err
		}
		c := tx.Bucket(bucketData).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(kvs) == limit {
				truncated = true
				break
			}
			kvs = append(kvs, &shardpb.KeyValue{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		}
		return nil
	})
	return kvs, truncated, lsn, err
}

// dump returns every key-value pair and the State, from one read transaction.
func dump(tx *bbolt.Tx) (map[string][]byte, target.State, error) {
	st, err := readState(tx)
	if err != nil {
		return nil, st, err
	}
	data := map[string][]byte{}
	err = tx.Bucket(bucketData).ForEach(func(k, v []byte) error {
		data[string(k)] = bytes.Clone(v)
		return nil
	})
	return data, st, err
}

// ReadDir opens the shard file in dir read-only (it must not be open
// elsewhere in this process) and returns its data and State, as one
// consistent snapshot. For tests and inspection tools.
func ReadDir(dir string) (map[string][]byte, target.State, error) {
	db, err := stateLayout.OpenReadOnly(filepath.Join(dir, FileName), time.Second)
	if err != nil {
		return nil, target.State{}, err // names the file
	}
	defer db.Close()
	var data map[string][]byte
	var st target.State
	err = db.View(func(tx *bbolt.Tx) error {
		data, st, err = dump(tx)
		return err
	})
	return data, st, err
}

func u64[T ~uint64](v T) []byte { return boltstate.U64(v) }

// readU64 reads an 8-byte big-endian value into dst; a missing key is 0.
func readU64[T ~uint64](b *bbolt.Bucket, key []byte, dst *T) error {
	v := b.Get(key)
	if v == nil {
		*dst = 0
		return nil
	}
	if len(v) != 8 {
		return fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, key, len(v))
	}
	*dst = T(binary.BigEndian.Uint64(v))
	return nil
}
