package target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// Clone: seed a new target from a sibling's snapshot, then register it so
// the LogPlayer delivers the tail (issue #29; `logplayer target clone`).

// Refusals of Clone. Each is wrapped with the numbers; nothing was
// registered or restored when Clone returns one.
var (
	// ErrCloneInvalid: the request itself is wrong (no ids, the same id
	// twice, no address for an unregistered new target).
	ErrCloneInvalid = errors.New("target clone: invalid request")
	// ErrUnknownSibling: --from names no registered target.
	ErrUnknownSibling = errors.New("target clone: the sibling is not a registered target")
	// ErrTopicsDiffer: the new target is registered with other topics than
	// the sibling: its data would not be the sibling's.
	ErrTopicsDiffer = errors.New("target clone: the targets' topics differ")
	// ErrSiblingBehind: the sibling's snapshot is at an applied LSN the log
	// no longer holds the transactions after (below the first retained
	// LSN): the new target could not be caught up from it.
	ErrSiblingBehind = errors.New("target clone: the sibling is behind the log's retention")
	// ErrOtherLogSnapshot: the snapshot was written from another log
	// (cluster or incarnation) than the LogStore's.
	ErrOtherLogSnapshot = errors.New("target clone: the sibling's data is from another log")
	// ErrTargetNotEmpty: the new target holds data the log cannot continue
	// (its applied LSN is below retention): it must be emptied first.
	ErrTargetNotEmpty = errors.New("target clone: the new target is not empty")
)

// Registry is what Clone needs from the LogStore (client.Client implements
// it): the target registry and the log's retained range and identity.
type Registry interface {
	ListRegisteredTargets(ctx context.Context, group string) (*logstorepb.ListRegisteredTargetsResponse, error)
	LeaderStatus(ctx context.Context) (*logstorepb.StatusResponse, error)
	RegisterTarget(ctx context.Context, t *logstorepb.RegisteredTarget) error
	UnregisterTarget(ctx context.Context, id string) error
}

// CloneConfig is one clone.
type CloneConfig struct {
	// From is the sibling snapshotted; To the new target. Both required.
	From, To types.TargetID
	// ToAddress is the new target's Deliver address when To is not
	// registered yet (registered: its registry address is used).
	ToAddress string
	// Registry is the LogStore.
	Registry Registry
	// Dial connects to a target's address (the caller's credentials).
	Dial func(addr string) (*grpc.ClientConn, error)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// CloneResult says what Clone did.
type CloneResult struct {
	// State is the new target's State (the snapshot's).
	State State
	// FirstLSN is the log's first retained LSN when the clone checked.
	FirstLSN types.LSN
	// Bytes is the snapshot's data size (0 when AlreadyRestored).
	Bytes uint64
	// AlreadyRestored: the new target already held data the log
	// continues (a clone that stopped after its restore): only the
	// registration was done.
	AlreadyRestored bool
}

// cloneRefusals name Clone's refusals (CloneRefusal).
var cloneRefusals = []struct {
	err  error
	name string
}{
	{ErrSiblingBehind, "SIBLING_BEHIND"},
	{ErrTopicsDiffer, "TOPICS_DIFFER"},
	{ErrOtherLogSnapshot, "OTHER_LOG"},
	{ErrTargetNotEmpty, "NOT_EMPTY"},
	{ErrUnknownSibling, "UNKNOWN_SIBLING"},
	{ErrCloneInvalid, "INVALID"},
}

// CloneRefusal is the name of the refusal of Clone that err wraps
// (SIBLING_BEHIND, TOPICS_DIFFER, OTHER_LOG, NOT_EMPTY, UNKNOWN_SIBLING,
// INVALID), or "" when it wraps none.
func CloneRefusal(err error) string {
	for _, r := range cloneRefusals {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return ""
}

// Message says in one line what the clone of from into to did.
func (r CloneResult) Message(from, to types.TargetID) string {
	if r.AlreadyRestored {
		return fmt.Sprintf("%s already held applied lsn %d (an earlier clone restored it); registered it: the LogPlayer delivers the tail",
			to, r.State.AppliedLSN)
	}
	return fmt.Sprintf("cloned %s into %s at applied lsn %d (%d bytes; the log's first retained lsn is %d); %s registered: the LogPlayer delivers the tail",
		from, to, r.State.AppliedLSN, r.Bytes, r.FirstLSN, to)
}

// Clone seeds cfg.To from a consistent snapshot of cfg.From and registers
// it (see docs/ARCHITECTURE.md "Bootstrapping a target from a sibling"):
//
//  1. both targets' addresses and topics from the registry; the topics
//     must be the same (ErrTopicsDiffer);
//  2. a Snapshot stream from the sibling; its header's applied LSN must be
//     no older than the log's retention (ErrSiblingBehind: applied+1 >= the
//     first retained LSN, so the tail is still in the log) and its State
//     from the LogStore's log (ErrOtherLogSnapshot);
//  3. the chunks are forwarded to the new target's Restore, which stages
//     them and switches atomically only after the end marker;
//  4. the new target is registered (unregistered first when it was, so
//     a LogPlayer that had blocked it below retention takes it back at
//     once), and the LogPlayer delivers the tail from the restored State.
//
// A clone stopped anywhere before step 4 registered nothing new and
// restored nothing (a partial restore is discarded by the target and by
// the next Restore): run it again. Stopped during step 4 (after the
// unregister), run it again with ToAddress. A new target that already
// holds data the log continues is not restored again: it is registered.
func Clone(ctx context.Context, cfg CloneConfig) (CloneResult, error) {
	var res CloneResult
	if cfg.From == "" || cfg.To == "" || cfg.From == cfg.To || cfg.Registry == nil || cfg.Dial == nil {
		return res, fmt.Errorf("%w: need --from and --to, two different target ids", ErrCloneInvalid)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	from, to, err := cloneTargets(ctx, cfg)
	if err != nil {
		return res, err
	}
	status, err := cfg.Registry.LeaderStatus(ctx)
	if err != nil {
		return res, fmt.Errorf("target clone: LogStore status: %w", err)
	}
	res.FirstLSN = types.LSN(status.FirstLsn)
	fromCC, err := cfg.Dial(from.Address)
	if err != nil {
		return res, fmt.Errorf("target clone: dial %s at %s: %w", from.Id, from.Address, err)
	}
	defer fromCC.Close()
	toCC, err := cfg.Dial(to.Address)
	if err != nil {
		return res, fmt.Errorf("target clone: dial %s at %s: %w", to.Id, to.Address, err)
	}
	defer toCC.Close()
	check := func(hdr *targetpb.SnapshotHeader) error {
		st := StateFromProto(hdr.State)
		if uint64(st.AppliedLSN)+1 < status.FirstLsn {
			return fmt.Errorf("%w: %s's snapshot is at applied lsn %d, the log's first retained lsn is %d: "+
				"lsns %d..%d are gone (clone from a more current sibling)", ErrSiblingBehind,
				from.Id, st.AppliedLSN, status.FirstLsn, st.AppliedLSN+1, status.FirstLsn-1)
		}
		if st.LogClusterID != status.LogClusterId || st.LogIncarnation != status.LogIncarnation {
			return fmt.Errorf("%w: %s's data is from log %q/%q, the LogStore is log %q/%q", ErrOtherLogSnapshot,
				from.Id, st.LogClusterID, st.LogIncarnation, status.LogClusterId, status.LogIncarnation)
		}
		return nil
	}
	st, n, err := CopySnapshot(ctx, fromCC, cfg.From, toCC, cfg.To, check)
	if d := Detail(err); d != nil && d.Code == logstorepb.ErrorCode_TARGET_NOT_EMPTY {
		if d.AppliedLsn == 0 || d.AppliedLsn+1 < status.FirstLsn {
			return res, fmt.Errorf("%w: %s holds applied lsn %d, below the log's first retained lsn %d: "+
				"empty it (a new store) and clone again: %w", ErrTargetNotEmpty, cfg.To, d.AppliedLsn, status.FirstLsn, err)
		}
		log.Info("target clone: the new target already holds data the log continues; registering it",
			"target", cfg.To, "applied_lsn", d.AppliedLsn)
		res.AlreadyRestored = true
		res.State.AppliedLSN = types.LSN(d.AppliedLsn)
	} else if err != nil {
		return res, err
	} else {
		res.State, res.Bytes = st, n
	}
	if err := register(ctx, cfg.Registry, to); err != nil {
		return res, err
	}
	return res, nil
}

// cloneTargets looks both targets up in the registry. An unregistered new
// target gets cfg.ToAddress and the sibling's topics.
func cloneTargets(ctx context.Context, cfg CloneConfig) (from, to *logstorepb.RegisteredTarget, err error) {
	reg, err := cfg.Registry.ListRegisteredTargets(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("target clone: read the target registry: %w", err)
	}
	for _, t := range reg.Targets {
		switch types.TargetID(t.Id) {
		case cfg.From:
			from = t
		case cfg.To:
			to = t
		}
	}
	if from == nil {
		return nil, nil, fmt.Errorf("%w: no registered target %q", ErrUnknownSibling, cfg.From)
	}
	if to == nil {
		if cfg.ToAddress == "" {
			return nil, nil, fmt.Errorf("%w: %s is not registered: give its address (--to-addr)", ErrCloneInvalid, cfg.To)
		}
		to = &logstorepb.RegisteredTarget{Id: string(cfg.To), Address: cfg.ToAddress, Topics: from.Topics}
		return from, to, nil
	}
	a, b := slices.Sorted(slices.Values(from.Topics)), slices.Sorted(slices.Values(to.Topics))
	if !slices.Equal(a, b) {
		return nil, nil, fmt.Errorf("%w: %s has topics %v, %s has %v", ErrTopicsDiffer, from.Id, a, to.Id, b)
	}
	return from, to, nil
}

// register (re-)registers t: unregistered first when it is registered, so
// that a LogPlayer holding it blocked (below retention) starts afresh.
func register(ctx context.Context, reg Registry, t *logstorepb.RegisteredTarget) error {
	list, err := reg.ListRegisteredTargets(ctx, "")
	if err != nil {
		return fmt.Errorf("target clone: read the target registry: %w", err)
	}
	for _, r := range list.Targets {
		if r.Id == t.Id {
			if err := reg.UnregisterTarget(ctx, t.Id); err != nil {
				return fmt.Errorf("target clone: unregister %s before registering it again: %w", t.Id, err)
			}
		}
	}
	if err := reg.RegisterTarget(ctx, t); err != nil {
		return fmt.Errorf("target clone: register %s at %s (restored; run the clone again with --to-addr %s): %w",
			t.Id, t.Address, t.Address, err)
	}
	return nil
}

// CopySnapshot streams a snapshot of target fromID (on from) into target
// toID (on to) and returns the State toID now holds and the data's size.
// check, when not nil, sees the snapshot's header before any data moves;
// its error ends the copy with nothing restored. The target's refusals
// come back as status errors with an ErrorDetail (Detail).
func CopySnapshot(ctx context.Context, from grpc.ClientConnInterface, fromID types.TargetID,
	to grpc.ClientConnInterface, toID types.TargetID, check func(*targetpb.SnapshotHeader) error) (State, uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a failed copy ends both streams: the Restore discards what it staged
	src, err := targetpb.NewTargetClient(from).Snapshot(ctx, &targetpb.SnapshotRequest{TargetId: string(fromID)})
	if err != nil {
		return State{}, 0, fmt.Errorf("target clone: snapshot of %s: %w", fromID, err)
	}
	first, err := src.Recv()
	if err != nil {
		return State{}, 0, fmt.Errorf("target clone: snapshot of %s: %w", fromID, err)
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return State{}, 0, fmt.Errorf("%w: the snapshot of %s does not start with a header", ErrSnapshotMismatch, fromID)
	}
	if check != nil {
		if err := check(hdr); err != nil {
			return State{}, 0, err
		}
	}
	dst, err := targetpb.NewTargetClient(to).Restore(ctx)
	if err != nil {
		return State{}, 0, fmt.Errorf("target clone: restore into %s: %w", toID, err)
	}
	req := &targetpb.RestoreRequest{TargetId: string(toID), Chunk: first}
	var n uint64
	for {
		if err := dst.Send(req); err != nil {
			break // the target ended the stream: CloseAndRecv returns why
		}
		if req.Chunk.GetEnd() != nil {
			break
		}
		c, err := src.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: the snapshot of %s ended without its end marker", ErrSnapshotMismatch, fromID)
			}
			return State{}, 0, fmt.Errorf("target clone: snapshot of %s: %w", fromID, err)
		}
		n += uint64(len(c.GetData()))
		req = &targetpb.RestoreRequest{Chunk: c}
	}
	resp, err := dst.CloseAndRecv()
	if err != nil {
		return State{}, 0, fmt.Errorf("target clone: restore into %s: %w", toID, err)
	}
	return StateFromProto(resp.State), n, nil
}
