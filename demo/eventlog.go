package demo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/boltstate"
	"github.com/logplayer/logplayer/types"
)

// EventLogFileName is the bbolt file of an events target inside its data
// directory (`logplayer events --data-dir`).
const EventLogFileName = "events.db"

// eventLogFormat is the on-disk layout below, stored in meta/format. It is
// a string, not a number like a shard's format, so that neither kind of
// file is mistaken for the other.
const eventLogFormat = "logplayer-eventlog/1"

// On-disk layout of an EventLog (one bbolt file): the State in the
// layout of target/boltstate (meta/format = eventLogFormat,
// meta/applied_lsn, meta/epoch, meta/log_cluster_id,
// meta/log_incarnation, offsets/<topic>) and
//
//	events/<lsn>      the delivery at lsn (8 bytes big-endian): a
//	                  targetpb.Delivery with its slices as delivered
//
// Invariant: one bbolt transaction (fsynced on commit) adds a group's
// deliveries and writes its State, so the events and the applied LSN never
// disagree. Progress markers (deliveries without slices) store nothing
// under events/.
var elBucketEvents = []byte("events")

// eventLogLayout is the event log's kind of boltstate file.
var eventLogLayout = boltstate.Layout{Format: []byte(eventLogFormat), Buckets: [][]byte{elBucketEvents}, Kind: ErrNotEventLog}

// ErrNotEventLog is wrapped by the errors of OpenEventLog and ReadEventLog
// about a file that is not an event log of this format (another bbolt
// file, such as a shard's, or no bbolt file at all), and by those about a
// damaged one (a *boltstate.FormatError names the file and the key).
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
	db, st, err := eventLogLayout.Open(path, time.Second)
	if err != nil {
		return nil, err // names the file; a *boltstate.FormatError wraps ErrNotEventLog
	}
	return &EventLog{db: db, written: st}, nil
}

// Close closes the file.
func (l *EventLog) Close() error { return l.db.Close() }

// State implements target.Store.
func (l *EventLog) State() (target.State, error) {
	var st target.State
	err := l.db.View(func(tx *bbolt.Tx) error {
		var err error
		st, err = eventLogLayout.Load(tx)
		return err
	})
	return st, err
}

// Apply implements target.Store: every delivery of ds that has slices and
// next, in one bbolt transaction. Any message is accepted (`logplayer
// append` may write events of its own shape); the SDK refuses the topics
// the target does not own (target.Config.Topics).
func (l *EventLog) Apply(ds []*targetpb.Delivery, next target.State) error {
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
			if err := events.Put(boltstate.U64(d.Lsn), vals[i]); err != nil {
				return err
			}
		}
		return boltstate.Save(tx, l.written, next)
	})
	if err != nil {
		return fmt.Errorf("demo: event log: commit lsn %d: %w", next.AppliedLSN, err)
	}
	l.written = next
	return nil
}

// ReadEventLog opens the event log at path read-only (it must not be open
// elsewhere in this process) and returns every stored event in LSN order
// (within a delivery in slice order, then offset order) and the State, as
// one consistent snapshot. For checks and inspection tools. A file that is
// not an event log is refused with an error wrapping ErrNotEventLog.
func ReadEventLog(path string) ([]Event, target.State, error) {
	db, err := eventLogLayout.OpenReadOnly(path, time.Second)
	if err != nil {
		return nil, target.State{}, err // names the file
	}
	defer db.Close()
	var out []Event
	var st target.State
	err = db.View(func(tx *bbolt.Tx) error {
		var err error
		if st, err = eventLogLayout.Load(tx); err != nil {
			return err
		}
		return tx.Bucket(elBucketEvents).ForEach(func(k, v []byte) error {
			var d targetpb.Delivery
			if len(k) != 8 || proto.Unmarshal(v, &d) != nil || d.Lsn != binary.BigEndian.Uint64(k) {
				return &boltstate.FormatError{File: path, Key: fmt.Sprintf("%s/%x", elBucketEvents, k),
					Problem: "undecodable event record", Kind: ErrNotEventLog}
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
		return nil, target.State{}, err // names the file
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
