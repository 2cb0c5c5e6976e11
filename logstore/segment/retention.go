package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/logplayer/logplayer/types"
)

// DeleteBefore applies retention: it removes the oldest sealed segments whose
// records are all below lsn and returns the bytes freed (segment and index
// files). It never removes the active segment nor the segment holding
// LastLSN (so LastRaftIndex stays known). Readers already inside a removed
// segment finish it; later reads below the new FirstLSN get
// ErrBelowRetention. It may wait for a Checkpoint in progress.
func (l *Log) DeleteBefore(lsn types.LSN) (int64, error) {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	n := 0
	for _, s := range l.mu.segs[:len(l.mu.segs)-1] {
		if !s.sealed || s.lastLSN() >= lsn || s.lastLSN() == l.mu.lastLSN {
			break
		}
		n++
	}
	drop := slices.Clone(l.mu.segs[:n])
	l.mu.segs = slices.Clone(l.mu.segs[n:])
	l.mu.Unlock()
	if n == 0 {
		return 0, nil
	}
	var freed int64
	var err error
	// Oldest first, each segment before its index: a crash in between
	// leaves a shorter contiguous log and an orphan index Open removes.
	for _, s := range drop {
		if err == nil {
			err = removeIfExists(s.segPath())
		}
		if err == nil {
			err = removeIfExists(s.idxPath())
		}
		if err == nil {
			freed += s.size + s.idxSize
			l.log.Info("retention removed segment", "segment", segFileName(s.base),
				"first_lsn", s.base, "lsn", s.lastLSN(), "bytes", s.size+s.idxSize)
		}
		s.release()
	}
	if err == nil {
		err = syncDir(l.opts.Dir)
	}
	return freed, err
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// TruncateAfterRaftIndex drops every record whose Raft index is above idx
// (recovery to a snapshot point: Raft then applies those entries again) and
// returns how many records it dropped. Their segment becomes the active one
// again; it is rewritten as a new file (never truncated in place, since a
// checkpoint may hard-link it and readers may be inside it). When every
// retained record is above idx the log becomes empty at FirstLSN.
func (l *Log) TruncateAfterRaftIndex(idx uint64) (int, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if l.mu.closed {
		return 0, ErrClosed
	}
	if l.mu.lastRaft <= idx {
		return 0, nil
	}
	segs := l.mu.segs
	k := slices.IndexFunc(segs, func(s *segment) bool { return s.count > 0 && s.lastRaft > idx })
	s := segs[k]
	cut, cutLSN, err := findRaftCut(s, idx)
	if err != nil {
		return 0, err
	}
	dropped := int(l.mu.lastLSN - cutLSN + 1)
	// Newest first, so that a crash leaves a contiguous log whose last
	// segment (scanned as the active one at Open) still ends in the records
	// to drop, and the caller truncates again.
	for _, later := range slices.Backward(segs[k+1:]) {
		if err := removeIfExists(later.segPath()); err != nil {
			return 0, err
		}
		if err := removeIfExists(later.idxPath()); err != nil {
			return 0, err
		}
	}
	if err := removeIfExists(s.idxPath()); err != nil {
		return 0, err
	}
	f, _, err := copyPrefix(s.segPath(), s.f, cut)
	if err != nil {
		return 0, err
	}
	ns := newSegment(l.opts.Dir, s.base, f)
	prevRaft := uint64(0)
	if k > 0 {
		prevRaft = segs[k-1].lastRaft
	}
	if err := l.recoverActive(ns, prevRaft); err != nil {
		ns.release()
		return 0, err
	}
	if ns.lastLSN() != cutLSN-1 {
		lost := ns.lastLSN()
		ns.release()
		return 0, fmt.Errorf("%w: %s: records before lsn %d did not survive the copy (last %d)", ErrCorrupt, segFileName(s.base), cutLSN, lost)
	}
	l.setSegs(append(slices.Clone(segs[:k]), ns))
	l.stats.truncatedRecords.Add(uint64(dropped))
	l.log.Info("truncated after raft index", "raft_index", idx, "lsn", cutLSN-1, "dropped", dropped)
	return dropped, nil
}

// findRaftCut returns the position and LSN of the first record of s whose
// Raft index is above idx (s.lastRaft > idx).
func findRaftCut(s *segment, idx uint64) (int64, types.LSN, error) {
	e := s.idx.seekRaft(idx)
	rr := newRecordReader(s.f, e.pos, s.size)
	defer rr.close()
	var m recordMeta
	for lsn := e.lsn; ; lsn++ {
		frame, at, err := rr.next()
		if errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("%w: %s: no record above raft index %d, index says %d", ErrCorrupt, segFileName(s.base), idx, s.lastRaft)
		}
		if err == nil {
			err = parseMeta(frame[headerBytes:], &m)
		}
		if err == nil && m.lsn != lsn {
			err = lsnMismatch(m.lsn, nil)
		}
		if err != nil {
			return 0, 0, readErr(s, at, lsn, err)
		}
		if m.raftIndex > idx {
			return at, lsn, nil
		}
	}
}
