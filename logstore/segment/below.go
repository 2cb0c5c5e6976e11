package segment

import (
	"errors"
	"fmt"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Below serves the records that retention deleted from the log: tiered
// storage (logstore/tier) holds the sealed segments it uploaded before
// retention was allowed to delete them. With a Below set (SetBelow), Read,
// Get and TopicOffsetLSN read below FirstLSN from it, transparently, and
// ErrBelowRetention means below what Below holds too.
//
// Records are the same whichever holds them (every replica writes the same
// record for an LSN), so a read may pass from Below to the local segments
// at any LSN.
type Below interface {
	// Oldest returns the smallest LSN f such that Below holds every LSN in
	// [f, upTo]; upTo+1 when it does not hold upTo. In-memory only.
	Oldest(upTo types.LSN) types.LSN
	// Read calls fn with each record in [from, to] in order, as Log.Read
	// does; ErrBelowRetention when it does not hold from. It may read
	// object storage.
	Read(from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) error
	// TopicOffsetLSN is Log.TopicOffsetLSN over what Below holds
	// (ErrNotFound when it holds no segment with the offset).
	TopicOffsetLSN(topic string, offset types.Offset) (types.LSN, error)
	// TopicFirstOffset is the topic's oldest offset Below holds in the
	// contiguous range Oldest describes. In-memory only.
	TopicFirstOffset(topic string, upTo types.LSN) (types.Offset, bool)
}

// SetBelow sets the Below that serves reads under FirstLSN (nil: none).
// Safe to call while readers run.
func (l *Log) SetBelow(b Below) {
	if b == nil {
		l.below.Store(nil)
		return
	}
	l.below.Store(&b)
}

func (l *Log) getBelow() Below {
	if p := l.below.Load(); p != nil {
		return *p
	}
	return nil
}

// OldestReadable is the oldest LSN Read can serve: FirstLSN, or lower when
// a Below holds the records just under it.
func (l *Log) OldestReadable() types.LSN {
	first := l.FirstLSN()
	if b := l.getBelow(); b != nil && first > 1 {
		return min(first, b.Oldest(first-1))
	}
	return first
}

// readBelow serves [from, min(to, FirstLSN-1)] from b and returns the next
// LSN to read and whether fn asked to stop (or failed).
func (l *Log) readBelow(b Below, from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) (types.LSN, bool, error) {
	end := l.FirstLSN() - 1
	if to != 0 && to < end {
		end = to
	}
	next, stop := from, false
	err := b.Read(from, end, func(txn *logstorepb.Transaction) (bool, error) {
		if got := types.LSN(txn.Lsn); got != next {
			return false, fmt.Errorf("%w: tiered storage returned lsn %d, want %d", ErrCorrupt, got, next)
		}
		next++
		ok, err := fn(txn)
		stop = !ok || err != nil
		return ok, err
	})
	if err != nil || stop {
		return next, true, err
	}
	if next <= end {
		return next, true, fmt.Errorf("%w: tiered storage ended at lsn %d, want %d", ErrCorrupt, next-1, end)
	}
	return next, false, nil
}

// topicOffsetBelow answers TopicOffsetLSN from the Below, when the local
// log answered err (below retention, or no retained message of topic).
func (l *Log) topicOffsetBelow(topic string, offset types.Offset, err error) (types.LSN, error) {
	b := l.getBelow()
	if b == nil || !(errors.Is(err, ErrBelowRetention) || errors.Is(err, ErrNotFound)) {
		return 0, err
	}
	lsn, berr := b.TopicOffsetLSN(topic, offset)
	if errors.Is(berr, ErrNotFound) {
		return 0, err
	}
	return lsn, berr
}
