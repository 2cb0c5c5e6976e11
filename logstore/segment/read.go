package segment

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// span is a reader's part of one segment, fixed under Log.mu: the records
// from LSN lsn at byte pos up to byte end (whole records, immutable bytes),
// the last of which is last. The reader holds a reference on s.
type span struct {
	s         *segment
	pos, end  int64
	lsn, last types.LSN
}

// segFor returns the index in segs of the segment holding lsn, which must be
// in [segs[0].base, lastLSN]. Under mu.
func (l *Log) segFor(lsn types.LSN) int {
	segs := l.mu.segs
	return sort.Search(len(segs), func(i int) bool { return segs[i].base > lsn }) - 1
}

// spans fixes the segments holding [from, to] (to 0: up to LastLSN) and takes
// a reference on each; the caller releases them. It returns the clamped to.
func (l *Log) spans(from, to types.LSN) ([]span, types.LSN, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, 0, ErrClosed
	}
	if first := l.mu.segs[0].base; from < first {
		return nil, 0, fmt.Errorf("%w: lsn %d, oldest retained is %d", ErrBelowRetention, from, first)
	}
	if to == 0 || to > l.mu.lastLSN {
		to = l.mu.lastLSN
	}
	if from > to {
		return nil, to, nil
	}
	var out []span
	for i := l.segFor(from); i < len(l.mu.segs) && l.mu.segs[i].base <= to; i++ {
		s := l.mu.segs[i]
		sp := span{s: s, end: s.size, lsn: s.base, last: s.lastLSN()}
		if from > s.base {
			if s.pos != nil {
				sp.pos, sp.lsn = s.pos[from-s.base], from
			} else {
				e := s.idx.seekLSN(from)
				sp.pos, sp.lsn = e.pos, e.lsn
			}
		}
		if s.pos != nil && to < sp.last {
			sp.end = s.pos[to+1-s.base]
		}
		s.acquire()
		out = append(out, sp)
	}
	return out, to, nil
}

func releaseSpans(spans []span) {
	for _, sp := range spans {
		sp.s.release()
	}
}

// Read calls fn with each record with LSN in [from, to] in order (to 0: up
// to LastLSN at the time of the call; a to above LastLSN is clamped to it).
// It stops when fn returns false or an error, and returns that error. It
// returns ErrBelowRetention when from < FirstLSN, and nil without calling fn
// when from > LastLSN. A record that fails its CRC or is not where the index
// says is ErrCorrupt. fn may keep the transactions. Read holds no lock while
// reading or calling fn.
//
// With a Below (SetBelow), records under FirstLSN are read from it first;
// retention moving FirstLSN meanwhile only moves the switch-over point.
func (l *Log) Read(from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) error {
	spans, to2, err := l.spans(from, to)
	for errors.Is(err, ErrBelowRetention) {
		b := l.getBelow()
		if b == nil {
			return err
		}
		var stop bool
		from, stop, err = l.readBelow(b, from, to, fn)
		if stop || err != nil {
			return err
		}
		if to != 0 && from > to {
			return nil
		}
		spans, to2, err = l.spans(from, to)
	}
	if err != nil {
		return err
	}
	to = to2
	defer releaseSpans(spans)
	for _, sp := range spans {
		if stop, err := readSpan(sp, from, to, fn); stop || err != nil {
			return err
		}
	}
	return nil
}

// readSpan calls fn with the records of sp in [from, to]; stop reports that fn
// asked to stop.
func readSpan(sp span, from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) (stop bool, err error) {
	rr := newRecordReader(sp.s.f, sp.pos, sp.end)
	defer rr.close()
	var m recordMeta
	for lsn := sp.lsn; lsn <= sp.last && lsn <= to; lsn++ {
		frame, at, err := rr.next()
		if err != nil {
			return true, readErr(sp.s, at, lsn, err)
		}
		if lsn < from {
			// Between a sparse index entry and from: only the LSN is
			// needed (and checked).
			if got, ok := peekLSN(frame[headerBytes:]); ok && got == lsn {
				continue
			}
			if err := parseMeta(frame[headerBytes:], &m); err != nil || m.lsn != lsn {
				return true, readErr(sp.s, at, lsn, lsnMismatch(m.lsn, err))
			}
			continue
		}
		txn, err := unmarshalPayload(frame[headerBytes:])
		if err == nil && types.LSN(txn.Lsn) != lsn {
			err = lsnMismatch(types.LSN(txn.Lsn), nil)
		}
		if err != nil {
			return true, readErr(sp.s, at, lsn, err)
		}
		ok, err := fn(txn)
		if err != nil || !ok {
			return true, err
		}
	}
	return false, nil
}

// Get returns the record of lsn: ErrBelowRetention below FirstLSN,
// ErrNotFound above LastLSN, ErrCorrupt when it fails its checks.
func (l *Log) Get(lsn types.LSN) (*logstorepb.Transaction, error) {
	if last := l.LastLSN(); lsn > last {
		return nil, fmt.Errorf("%w: lsn %d, last is %d", ErrNotFound, lsn, last)
	}
	var out *logstorepb.Transaction
	err := l.Read(lsn, lsn, func(txn *logstorepb.Transaction) (bool, error) {
		out = txn
		return false, nil
	})
	if err == nil && out == nil {
		// Retention or truncation raced the call.
		err = fmt.Errorf("%w: lsn %d", ErrNotFound, lsn)
	}
	return out, err
}

// TopicOffsetLSN returns the LSN of the transaction whose slice of topic holds
// the message at offset: ErrBelowRetention when the offset is below the
// topic's oldest retained offset, ErrNotFound when the topic has no retained
// message or the offset is not written yet. It seeks through the segments'
// topic indexes and scans at most TopicIndexIntervalBytes of one segment.
func (l *Log) TopicOffsetLSN(topic string, offset types.Offset) (types.LSN, error) {
	sp, e, err := l.topicSpan(topic, offset)
	if err != nil {
		return l.topicOffsetBelow(topic, offset, err)
	}
	defer sp.s.release()
	return scanTopic(sp, e, topic, offset)
}

// scanTopic scans sp from the topic index entry e for the record holding
// offset of topic (the segment's topic range holds it).
func scanTopic(sp span, e topicEntry, topic string, offset types.Offset) (types.LSN, error) {
	rr := newRecordReader(sp.s.f, e.pos, sp.end)
	defer rr.close()
	var m recordMeta
	for lsn := e.lsn; lsn <= sp.last; lsn++ {
		frame, at, err := rr.next()
		if err == nil {
			err = parseMeta(frame[headerBytes:], &m)
		}
		if err == nil && m.lsn != lsn {
			err = lsnMismatch(m.lsn, nil)
		}
		if err != nil {
			return 0, readErr(sp.s, at, lsn, err)
		}
		for _, sl := range m.slices {
			if string(sl.topic) != topic {
				continue
			}
			if offset < sl.firstOffset {
				return 0, fmt.Errorf("%w: segment %s: topic %q offset %d is missing before lsn %d",
					ErrCorrupt, segFileName(sp.s.base), topic, offset, lsn)
			}
			if offset < sl.firstOffset+types.Offset(sl.messages) {
				return lsn, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: segment %s: topic %q offset %d indexed but not found",
		ErrCorrupt, segFileName(sp.s.base), topic, offset)
}

// topicSpan finds the segment holding offset of topic and the index entry to
// scan from, and takes a reference on the segment.
func (l *Log) topicSpan(topic string, offset types.Offset) (span, topicEntry, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return span{}, topicEntry{}, ErrClosed
	}
	seen := false // a newer segment holds the topic, from offset first
	var first types.Offset
	for i := len(l.mu.segs) - 1; i >= 0; i-- {
		s := l.mu.segs[i]
		t := s.idx.topics[topic]
		if t == nil {
			continue
		}
		if offset >= t.end {
			if !seen {
				return span{}, topicEntry{}, fmt.Errorf("%w: topic %q offset %d, next offset is %d", ErrNotFound, topic, offset, t.end)
			}
			return span{}, topicEntry{}, fmt.Errorf("%w: topic %q offset %d is between segments %s and the next", ErrNotFound, topic, offset, segFileName(s.base))
		}
		seen, first = true, t.first
		if offset >= t.first {
			s.acquire()
			return span{s: s, end: s.size, last: s.lastLSN()}, t.seek(offset), nil
		}
	}
	if seen {
		return span{}, topicEntry{}, fmt.Errorf("%w: topic %q offset %d, oldest retained is %d", ErrBelowRetention, topic, offset, first)
	}
	return span{}, topicEntry{}, fmt.Errorf("%w: topic %q has no retained message", ErrNotFound, topic)
}

func lsnMismatch(got types.LSN, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: record has lsn %d", ErrCorrupt, got)
}

// readErr describes a failed read of the record expected at byte at of s.
// A record missing or cut short where the index promised one is corruption;
// an I/O error stays an I/O error.
func readErr(s *segment, at int64, lsn types.LSN, err error) error {
	where := fmt.Sprintf("segment %s byte %d (lsn %d)", segFileName(s.base), at, lsn)
	switch {
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("%s: %w", where, err)
	case errors.Is(err, errTruncated), errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, where, err)
	default:
		return fmt.Errorf("segment: read %s: %w", where, err)
	}
}

// TopicFirstOffset returns the oldest retained offset of topic: the first
// offset of the topic in the oldest segment that holds it, and false when no
// retained segment holds a message of it. It reads only in-memory indexes.
//
// With a Below, the topic's oldest offset there comes first.
func (l *Log) TopicFirstOffset(topic string) (types.Offset, bool) {
	if b := l.getBelow(); b != nil {
		if first := l.FirstLSN(); first > 1 {
			if off, ok := b.TopicFirstOffset(topic, first-1); ok {
				return off, true
			}
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.mu.segs {
		if t := s.idx.topics[topic]; t != nil {
			return t.first, true
		}
	}
	return 0, false
}

// TopicFirstOffsets returns TopicFirstOffset of every topic with a retained
// message.
func (l *Log) TopicFirstOffsets() map[string]types.Offset {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[string]types.Offset{}
	for _, s := range l.mu.segs {
		for name, t := range s.idx.topics {
			if _, ok := out[name]; !ok {
				out[name] = t.first
			}
		}
	}
	return out
}
