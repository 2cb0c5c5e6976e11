package demo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// EventLogFileName is the bbolt file of an events target inside its data
// directory (`logplayer events --data-dir`).
const EventLogFileName = "events.db"

// eventLogFormat is the on-disk layout below, stored in meta/format. It is
// a string, not a number like a shard's format, so that neither kind of
// file is mistaken for the other.
const eventLogFormat = "logplayer-eventlog/1"

// On-disk layout of an EventLog (one bbolt file):
//
//	meta/format       eventLogFormat
//	meta/applied_lsn  State.AppliedLSN, 8 bytes big-endian
//	meta/epoch        State.Epoch, 8 bytes big-endian
//	meta/log_cluster_id, meta/log_incarnation
//	                  State.LogClusterID, LogIncarnation (the log the State
//	                  was written from; absent: none yet, the first Hello
//	                  that carries one is adopted), at most
//	                  maxLogIdentityBytes each
//	offsets/<topic>   State.Topics[topic] (next offset), 8 bytes big-endian
//	events/<lsn>      the delivery at lsn (8 bytes big-endian): a
//	                  targetpb.Delivery with its slices as delivered
//
// Invariant: one bbolt transaction (fsynced on commit) adds a group's
// deliveries and writes its State, so the events and the applied LSN never
// disagree. Progress markers (deliveries without slices) store nothing
// under events/.
var (
	elBucketMeta    = []byte("meta")
	elBucketOffsets = []byte("offsets")
	elBucketEvents  = []byte("events")
	elKeyFormat     = []byte("format")
	elKeyApplied    = []byte("applied_lsn")
	elKeyEpoch      = []byte("epoch")
	elKeyLogCluster = []byte("log_cluster_id")
	elKeyLogInc     = []byte("log_incarnation")
)

// maxLogIdentityBytes bounds each stored part of the log identity: the
// LogStore's are 16 hex digits; a longer value is a damaged file.
const maxLogIdentityBytes = 256

// ErrNotEventLog is wrapped by the errors of OpenEventLog and ReadEventLog
// about a file that is not an event log of this format (another bbolt
// file, such as a shard's, or no bbolt file at all), and by those about a
// damaged one.
var ErrNotEventLog = errors.New("demo: not an event log")

// Event is one message an events target applied: its delivery's LSN, its
// topic, its offset in the topic and the message as delivered.
type Event struct {
	LSN     types.LSN
	Topic   string
	Offset  types.Offset
	Message *logstorepb.Message
}

// EventLog is the durable events target: a target.Store on one bbolt file
// that keeps every message it applies, by LSN, with the State, in the same
// fsynced transaction. Open it with OpenEventLog; read a closed one with
// ReadEventLog.
type EventLog struct {
	db *bbolt.DB
	// written is the State of the last commit; the SDK's applier only.
	written target.State
}

var _ target.Store = (*EventLog)(nil)

// OpenEventLog opens (or creates) the event log at path, waiting up to a
// second for another process's lock on it. A file that is not an event log
// is refused with an error wrapping ErrNotEventLog.
func OpenEventLog(path string) (*EventLog, error) {
	// NoSync stays false: bbolt fsyncs every commit, which is what makes an
	// ack durable. NoFreelistSync as in the shard (shard/store.go).
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, NoSync: false,
		NoFreelistSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return nil, openError(path, err)
	}
	l := &EventLog{db: db}
	if err := db.Update(initEventLog); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("demo: event log %s: %w", path, err)
	}
	if l.written, err = l.State(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("demo: event log %s: %w", path, err)
	}
	return l, nil
}

// openError wraps bbolt's refusals of a file that is no bbolt database in
// ErrNotEventLog; other errors (permissions, the lock) stay as they are.
func openError(path string, err error) error {
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
		return fmt.Errorf("%w: %s: %w", ErrNotEventLog, path, err)
	}
	return fmt.Errorf("demo: open event log %s: %w", path, err)
}

// initEventLog creates the buckets of a new file and checks an old one.
func initEventLog(tx *bbolt.Tx) error {
	meta := tx.Bucket(elBucketMeta)
	if meta == nil {
		empty := true
		if err := tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil }); err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("%w: buckets without meta", ErrNotEventLog)
		}
		for _, b := range [][]byte{elBucketMeta, elBucketOffsets, elBucketEvents} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(elBucketMeta).Put(elKeyFormat, []byte(eventLogFormat))
	}
	return checkEventLog(tx)
}

// checkEventLog checks the format and the buckets of an existing file.
func checkEventLog(tx *bbolt.Tx) error {
	meta := tx.Bucket(elBucketMeta)
	if meta == nil {
		return fmt.Errorf("%w: no meta bucket", ErrNotEventLog)
	}
	if f := meta.Get(elKeyFormat); string(f) != eventLogFormat {
		return fmt.Errorf("%w: format %q, this build reads %q", ErrNotEventLog, f, eventLogFormat)
	}
	if tx.Bucket(elBucketOffsets) == nil || tx.Bucket(elBucketEvents) == nil {
		return fmt.Errorf("%w: missing bucket", ErrNotEventLog)
	}
	return nil
}

// Close closes the file.
func (l *EventLog) Close() error { return l.db.Close() }

// State implements target.Store.
func (l *EventLog) State() (target.State, error) {
	var st target.State
	err := l.db.View(func(tx *bbolt.Tx) error {
		var err error
		st, err = readEventLogState(tx)
		return err
	})
	return st, err
}

func readEventLogState(tx *bbolt.Tx) (target.State, error) {
	st := target.State{Topics: map[string]types.Offset{}}
	meta := tx.Bucket(elBucketMeta)
	if err := readEventLogU64(meta, elKeyApplied, &st.AppliedLSN); err != nil {
		return st, err
	}
	if err := readEventLogU64(meta, elKeyEpoch, &st.Epoch); err != nil {
		return st, err
	}
	for _, f := range []struct {
		key []byte
		dst *string
	}{{elKeyLogCluster, &st.LogClusterID}, {elKeyLogInc, &st.LogIncarnation}} {
		v := meta.Get(f.key)
		if len(v) > maxLogIdentityBytes || !utf8.Valid(v) {
			return st, fmt.Errorf("%w: %s is %d bytes, not a log identity", ErrNotEventLog, f.key, len(v))
		}
		*f.dst = string(v)
	}
	err := tx.Bucket(elBucketOffsets).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: offset of topic %q is %d bytes", ErrNotEventLog, k, len(v))
		}
		st.Topics[string(k)] = types.Offset(binary.BigEndian.Uint64(v))
		return nil
	})
	return st, err
}

// Apply implements target.Store: every delivery of ds that has slices and
// next, in one bbolt transaction. Any message is accepted (`logplayer
// append` may write events of its own shape); the SDK refuses the topics
// the target does not own (target.Config.Topics).
func (l *EventLog) Apply(ds []*targetpb.Delivery, next target.State) error {
	if next.AppliedLSN < l.written.AppliedLSN || next.Epoch < l.written.Epoch {
		panic(fmt.Sprintf("demo: event log state going backwards: lsn %d -> %d, epoch %d -> %d",
			l.written.AppliedLSN, next.AppliedLSN, l.written.Epoch, next.Epoch))
	}
	vals := make([][]byte, len(ds))
	for i, d := range ds {
		if len(d.Slices) == 0 {
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(d)
		if err != nil {
			return fmt.Errorf("demo: event log: encode lsn %d: %w", d.Lsn, err)
		}
		vals[i] = b
	}
	err := l.db.Update(func(tx *bbolt.Tx) error {
		events := tx.Bucket(elBucketEvents)
		for i, d := range ds {
			if vals[i] == nil {
				continue
			}
			if err := events.Put(u64Key(types.LSN(d.Lsn)), vals[i]); err != nil {
				return err
			}
		}
		return l.writeState(tx, next)
	})
	if err != nil {
		return fmt.Errorf("demo: event log: commit lsn %d: %w", next.AppliedLSN, err)
	}
	l.written = next
	return nil
}

// writeState writes what changed between l.written and next.
func (l *EventLog) writeState(tx *bbolt.Tx, next target.State) error {
	meta := tx.Bucket(elBucketMeta)
	if err := meta.Put(elKeyApplied, u64Key(next.AppliedLSN)); err != nil {
		return err
	}
	if err := meta.Put(elKeyEpoch, u64Key(next.Epoch)); err != nil {
		return err
	}
	if next.LogClusterID != l.written.LogClusterID || next.LogIncarnation != l.written.LogIncarnation {
		if err := putLogIdentity(meta, next.LogClusterID, next.LogIncarnation); err != nil {
			return err
		}
	}
	offsets := tx.Bucket(elBucketOffsets)
	for topic, o := range next.Topics {
		if old, ok := l.written.Topics[topic]; ok && old == o {
			continue
		}
		if err := offsets.Put([]byte(topic), u64Key(o)); err != nil {
			return err
		}
	}
	return nil
}

// putLogIdentity stores the log identity in meta; an empty identity
// removes the keys (none stored: the next Hello's is adopted).
func putLogIdentity(meta *bbolt.Bucket, cluster, incarnation string) error {
	for _, kv := range [][2][]byte{{elKeyLogCluster, []byte(cluster)}, {elKeyLogInc, []byte(incarnation)}} {
		if len(kv[1]) > maxLogIdentityBytes {
			return fmt.Errorf("demo: event log: %s of %d bytes (at most %d)", kv[0], len(kv[1]), maxLogIdentityBytes)
		}
		var err error
		if len(kv[1]) == 0 {
			err = meta.Delete(kv[0])
		} else {
			err = meta.Put(kv[0], kv[1])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ReadEventLog opens the event log at path read-only (it must not be open
// elsewhere in this process) and returns every stored event in LSN order
// (within a delivery in slice order, then offset order) and the State, as
// one consistent snapshot. For checks and inspection tools. A file that is
// not an event log is refused with an error wrapping ErrNotEventLog.
func ReadEventLog(path string) ([]Event, target.State, error) {
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, target.State{}, openError(path, err)
	}
	defer db.Close()
	var out []Event
	var st target.State
	err = db.View(func(tx *bbolt.Tx) error {
		if err := checkEventLog(tx); err != nil {
			return err
		}
		var err error
		if st, err = readEventLogState(tx); err != nil {
			return err
		}
		return tx.Bucket(elBucketEvents).ForEach(func(k, v []byte) error {
			d, err := decodeEvent(k, v)
			if err != nil {
				return err
			}
			for _, s := range d.Slices {
				for i, m := range s.Messages {
					out = append(out, Event{LSN: types.LSN(d.Lsn), Topic: s.Topic,
						Offset: types.Offset(s.FirstOffset + uint64(i)), Message: m})
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, target.State{}, fmt.Errorf("demo: event log %s: %w", path, err)
	}
	return out, st, nil
}

// decodeEvent decodes the events/ record k, v.
func decodeEvent(k, v []byte) (*targetpb.Delivery, error) {
	var d targetpb.Delivery
	if len(k) != 8 || proto.Unmarshal(v, &d) != nil || d.Lsn != binary.BigEndian.Uint64(k) {
		return nil, fmt.Errorf("%w: undecodable event record under key %x", ErrNotEventLog, k)
	}
	return &d, nil
}

// u64Key is v as 8 bytes big-endian: keys in this order sort by value.
func u64Key[T ~uint64](v T) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// readEventLogU64 reads an 8-byte big-endian value into dst; a missing key
// is 0.
func readEventLogU64[T ~uint64](b *bbolt.Bucket, key []byte, dst *T) error {
	v := b.Get(key)
	if v == nil {
		*dst = 0
		return nil
	}
	if len(v) != 8 {
		return fmt.Errorf("%w: %s is %d bytes", ErrNotEventLog, key, len(v))
	}
	*dst = T(binary.BigEndian.Uint64(v))
	return nil
}
