package demo

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/boltstate"
	"github.com/logplayer/logplayer/types"
)

// ErrBadReset is wrapped by the errors of ResetEventLog about a reset it
// refuses (a position or an epoch above the stored one); the file is not
// changed.
var ErrBadReset = errors.New("demo: refused reset")

// EventLogReset says what ResetEventLog changes besides the log identity,
// which it always removes (the next Hello's identity is adopted).
type EventLogReset struct {
	// LSN, when not nil, is the applied LSN to go back to (at most the
	// stored one): the events above it are deleted and each topic's next
	// offset is recomputed from the events kept (a topic with none kept is
	// forgotten). 0 empties the file: the target is delivered the log again
	// from its start (or its retention). Nil keeps the position and the
	// events.
	LSN *types.LSN
	// Epoch, when not nil, is the highest LogPlayer epoch to keep (at most
	// the stored one): the way out of an epoch set too high (a Hello from a
	// caller holding the player role, docs/SECURITY.md). Nil keeps it.
	Epoch *types.Epoch
	// DryRun computes the result without changing the file.
	DryRun bool
}

// EventLogResetResult is the State before and after a reset and the count
// of events deleted.
type EventLogResetResult struct {
	Before, After target.State
	Removed       int
}

// ResetEventLog is the operator's explicit reset of an events target
// (`logplayer target reset`, README Runbook): in one bbolt transaction it
// removes the stored log identity and, as r says, moves the applied LSN and
// the epoch back. The target must be stopped: a file another process holds
// is refused after a second. A reset above the stored position or epoch is
// refused with ErrBadReset and changes nothing; a file that is not an event
// log is refused with ErrNotEventLog.
//
// Limit: a delivery dropped by target.Config.SkipLSNs left no event but
// advanced its topics; a reset to an LSN at or above it recomputes those
// topics' positions from the events alone, behind the log, and the next
// delivery is refused (offset_gap). Re-seed such a target instead.
func ResetEventLog(path string, r EventLogReset) (EventLogResetResult, error) {
	var res EventLogResetResult
	db, err := bbolt.Open(path, 0o600, boltstate.Options(time.Second))
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return res, fmt.Errorf("demo: event log %s is open in another process (stop the target first): %w", path, err)
		}
		return res, eventLogLayout.OpenError(path, err)
	}
	errDryRun := errors.New("dry run") // rolls the transaction back
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := eventLogLayout.Check(tx); err != nil {
			return err
		}
		var err error
		if res.Before, err = eventLogLayout.Load(tx); err != nil {
			return err
		}
		if res.After, res.Removed, err = resetEventLogTx(tx, res.Before, r); err != nil {
			return err
		}
		if r.DryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return EventLogResetResult{}, fmt.Errorf("demo: event log %s: %w", path, err)
	}
	return res, nil
}

// resetEventLogTx applies r to the file in tx, whose State is cur.
func resetEventLogTx(tx *bbolt.Tx, cur target.State, r EventLogReset) (target.State, int, error) {
	next := cur.Clone()
	next.LogClusterID, next.LogIncarnation = "", ""
	if r.Epoch != nil {
		if *r.Epoch > cur.Epoch {
			return next, 0, fmt.Errorf("%w: epoch %d is above the stored epoch %d (a reset only lowers it)", ErrBadReset, *r.Epoch, cur.Epoch)
		}
		next.Epoch = *r.Epoch
	}
	removed := 0
	if r.LSN != nil && *r.LSN != cur.AppliedLSN {
		if *r.LSN > cur.AppliedLSN {
			return next, 0, fmt.Errorf("%w: lsn %d is above the applied lsn %d (a reset only goes back)", ErrBadReset, *r.LSN, cur.AppliedLSN)
		}
		next.AppliedLSN = *r.LSN
		var err error
		if next.Topics, removed, err = truncateEvents(tx.Bucket(elBucketEvents), *r.LSN); err != nil {
			return next, 0, err
		}
	}
	return next, removed, boltstate.Overwrite(tx, next)
}

// truncateEvents deletes the events above lsn and returns each topic's next
// offset after the events kept, and the count deleted.
func truncateEvents(events *bbolt.Bucket, lsn types.LSN) (map[string]types.Offset, int, error) {
	topics := map[string]types.Offset{}
	var above [][]byte
	err := events.ForEach(func(k, v []byte) error {
		d, err := decodeEvent(k, v)
		if err != nil {
			return err
		}
		if types.LSN(d.Lsn) > lsn {
			above = append(above, bytes.Clone(k))
			return nil
		}
		for _, s := range d.Slices {
			topics[s.Topic] = types.Offset(s.FirstOffset + uint64(len(s.Messages)))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	for _, k := range above { // not while iterating: bbolt's ForEach forbids it
		if err := events.Delete(k); err != nil {
			return nil, 0, err
		}
	}
	return topics, len(above), nil
}
