package target

import (
	"errors"
	"fmt"
	"maps"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// State is a target's durable delivery position. A Store persists it in the
// same local transaction as the data it describes.
//
// Invariants: AppliedLSN and every Topics entry only grow; Epoch only grows.
type State struct {
	// AppliedLSN is the highest LSN applied (0: nothing yet). Every delivery
	// with an LSN <= AppliedLSN is durably applied, progress markers included.
	AppliedLSN types.LSN
	// Epoch is the highest LogPlayer epoch that has opened a stream to this
	// target (0: none yet). Persisted so that fencing survives a restart.
	Epoch types.Epoch
	// Topics maps each topic this target has received to the next offset it
	// expects in that topic. Topics never seen are absent.
	Topics map[string]types.Offset
	// LogClusterID and LogIncarnation are the identity of the log this State
	// was written from (Hello.log_cluster_id, log_incarnation): a Hello from
	// another log is refused (OTHER_LOG). Empty: none yet (a State written
	// before identities existed): the first Hello that carries one is
	// adopted. Plain strings, stored with the rest of the State.
	LogClusterID   string
	LogIncarnation string
}

// Clone returns a copy of s whose Topics map is not shared.
func (s State) Clone() State {
	s.Topics = maps.Clone(s.Topics)
	if s.Topics == nil {
		s.Topics = map[string]types.Offset{}
	}
	return s
}

// Store is what an application implements to become a target.
//
// The SDK calls Store methods from one goroutine at a time (never
// concurrently with each other); the application may read its own data
// concurrently.
type Store interface {
	// State returns the durable State: what a restart would find. It is called
	// once by NewServer and again after an Apply that failed with an error
	// that is not permanent.
	State() (State, error)

	// Apply applies ds and records next as the new State in ONE local atomic
	// durable transaction: when Apply returns nil, both the effects of ds and
	// next survive a crash; when it returns an error, none of them may have
	// been applied (a crash in the middle must also leave the old State and
	// the old data).
	//
	// The SDK has already checked continuity: ds have strictly increasing
	// LSNs, all above the current AppliedLSN; each slice's first offset
	// follows on from its topic's position; next.AppliedLSN is the LSN of the
	// last delivery. A delivery with no slices is a progress marker: it has
	// no data but its LSN is applied. ds may be empty: then only next.Epoch
	// changed (a LogPlayer with a higher epoch took over) or the log identity
	// was adopted, and must be stored.
	// next.Topics is the complete map; the SDK does not modify next after the
	// call, so the Store may keep it. The Store must not modify ds.
	//
	// An error that wraps ErrPermanent (use Permanent) says the data of one
	// delivery can never be applied (a malformed payload): the SDK refuses
	// that delivery's batch with a permanent error naming its LSN. Any other
	// error is treated as transient (disk full, I/O): the SDK reloads State
	// and asks the LogPlayer to reconnect. An error that wraps ErrStaleEpoch
	// (use StaleEpoch) says the Store holds an epoch above next.Epoch, stored
	// through another process sharing it: the SDK refuses the stream with
	// STALE_EPOCH, as a Hello below the epoch it knows, and reloads State.
	Apply(ds []*targetpb.Delivery, next State) error
}

// ErrStaleEpoch marks an Apply error saying that a LogPlayer with a higher
// epoch owns the target: the Store's durable epoch, written by another
// process sharing the Store (two target processes for one target id on one
// database, target/sqlstore), is above next.Epoch. Nothing was applied.
// Create it with StaleEpoch.
var ErrStaleEpoch = errors.New("a newer LogPlayer owns the target")

// StaleEpochError is an ErrStaleEpoch with the epoch the Store holds. It
// matches ErrStaleEpoch under errors.Is.
type StaleEpochError struct {
	Epoch types.Epoch // the epoch the Store holds, above the stream's
	Err   error
}

// StaleEpoch returns an error saying that the Store holds epoch stored,
// above the epoch of the Apply's State, because of err.
func StaleEpoch(stored types.Epoch, err error) error {
	return &StaleEpochError{Epoch: stored, Err: err}
}

func (e *StaleEpochError) Error() string {
	return fmt.Sprintf("%v (the store holds epoch %d): %v", ErrStaleEpoch, e.Epoch, e.Err)
}

// Unwrap lets errors.Is see both ErrStaleEpoch and the cause.
func (e *StaleEpochError) Unwrap() []error { return []error{ErrStaleEpoch, e.Err} }

// ErrPermanent marks an Apply error that retrying cannot fix: the delivery's
// data is malformed for this target. Create it with Permanent.
var ErrPermanent = errors.New("permanent apply failure")

// ApplyError is a permanent Apply failure at one LSN. It matches ErrPermanent
// under errors.Is.
type ApplyError struct {
	LSN types.LSN
	Err error
}

// Permanent returns an error saying that the delivery at lsn can never be
// applied because of err.
func Permanent(lsn types.LSN, err error) error {
	return &ApplyError{LSN: lsn, Err: err}
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("lsn %d: %v: %v", e.LSN, ErrPermanent, e.Err)
}

// Unwrap lets errors.Is see both ErrPermanent and the cause.
func (e *ApplyError) Unwrap() []error { return []error{ErrPermanent, e.Err} }
