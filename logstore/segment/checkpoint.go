package segment

import (
	"fmt"
	"github.com/logplayer/logplayer/internal/vfs"
	"io"
	"path/filepath"

	"github.com/logplayer/logplayer/types"
)

// cpFile is one file of a checkpoint being made: linked from the log (src
// set), or the first copyLen bytes of seg copied (the last segment).
type cpFile struct {
	info    FileInfo
	src     string
	seg     *segment
	copyLen int64
}

// Checkpoint syncs the log, then fills dir (created if missing, its path made
// durable; it must hold no segment files) with a point-in-time copy of the
// log from FirstLSN up to the record upTo: sealed segments wholly at or below
// upTo and their index files are hard-linked (sealed files are immutable),
// the segment holding upTo contributes a copy of its bytes up to upTo, and
// when upTo ends a sealed segment an empty segment file follows it. It
// returns the manifest of dir. upTo below FirstLSN-1 is ErrBelowRetention,
// above LastLSN ErrNotFound. Appends go on meanwhile; DeleteBefore,
// TruncateAfterRaftIndex and Install wait.
func (l *Log) Checkpoint(dir string, upTo types.LSN) (Manifest, error) {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if l.hooks.beforeCheckpointPlan != nil {
		l.hooks.beforeCheckpointPlan()
	}
	plan, m, err := l.planCheckpoint(upTo)
	if err != nil {
		return Manifest{}, err
	}
	defer func() {
		for _, f := range plan {
			if f.seg != nil {
				f.seg.release()
			}
		}
	}()
	// Sync after the plan, not before: appends go on, and a segment sealed
	// between a Sync and the plan would be planned as sealed (its files
	// linked) while the sealer has not yet fsynced it or written its
	// index file. Every segment the plan saw sealed was queued to the
	// sealer before it was published as sealed, so this Sync waits for it.
	if err := l.Sync(); err != nil {
		return Manifest{}, err
	}
	if last := &plan[len(plan)-1]; last.copyLen < 0 {
		if last.copyLen, err = positionAfter(last.seg, upTo); err != nil {
			return Manifest{}, err
		}
	}
	for i := range plan {
		if plan[i].src == "" {
			plan[i].info.Bytes = plan[i].copyLen
		}
	}
	if err := vfs.MkdirAllSync(l.fs, dir, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("segment: %w", err)
	}
	names, err := l.fs.ReadDir(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("segment: %w", err)
	}
	for _, name := range names {
		if _, _, ok := parseFileName(name); ok {
			return Manifest{}, fmt.Errorf("segment: checkpoint dir %s already holds %s", dir, name)
		}
	}
	for i := range plan {
		f := &plan[i]
		dst := filepath.Join(dir, f.info.Name)
		switch {
		case f.src != "":
			if err := l.fs.Link(f.src, dst); err != nil {
				if !vfs.IsCrossDevice(err) {
					return Manifest{}, fmt.Errorf("segment: checkpoint: %w", err)
				}
				l.log.Warn("checkpoint dir on another device: copying a sealed file instead of linking it", "file", f.info.Name, "bytes", f.info.Bytes)
				src, err := l.fs.Open(f.src)
				if err != nil {
					return Manifest{}, fmt.Errorf("segment: checkpoint: %w", err)
				}
				nf, _, err := copyPrefix(l.fs, dst, src, f.info.Bytes)
				_ = src.Close()
				if err != nil {
					return Manifest{}, err
				}
				_ = nf.Close()
			}
		default:
			var src io.ReaderAt = emptyReader{}
			if f.seg != nil {
				src = f.seg.f
			}
			nf, crc, err := copyPrefix(l.fs, dst, src, f.copyLen)
			if err != nil {
				return Manifest{}, err
			}
			_ = nf.Close()
			f.info.CRC = crc
		}
		m.Files = append(m.Files, f.info)
	}
	if err := syncDir(l.fs, dir); err != nil {
		return Manifest{}, err
	}
	if last := m.LastLSN; last >= m.FirstLSN {
		txn, err := l.Get(last)
		if err != nil {
			return Manifest{}, err
		}
		m.LastRaftIndex = txn.RaftIndex
	}
	return m, m.validate()
}

// planCheckpoint lists the files of a checkpoint up to upTo under mu and
// takes a reference on each segment to copy from. A copy whose length needs a
// scan (upTo inside a sealed segment) has copyLen -1, and sizes are not set:
// the caller does that I/O outside mu.
func (l *Log) planCheckpoint(upTo types.LSN) ([]cpFile, Manifest, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, Manifest{}, ErrClosed
	}
	first := l.mu.segs[0].base
	if upTo+1 < first {
		return nil, Manifest{}, fmt.Errorf("%w: checkpoint up to lsn %d, oldest retained is %d", ErrBelowRetention, upTo, first)
	}
	if upTo > l.mu.lastLSN {
		return nil, Manifest{}, fmt.Errorf("%w: checkpoint up to lsn %d, last is %d", ErrNotFound, upTo, l.mu.lastLSN)
	}
	m := Manifest{FirstLSN: first, LastLSN: upTo}
	var plan []cpFile
	for _, s := range l.mu.segs {
		if s.base > upTo {
			break
		}
		if s.sealed && s.lastLSN() <= upTo {
			plan = append(plan,
				cpFile{src: s.segPath(), info: FileInfo{Name: segFileName(s.base), Bytes: s.size, CRC: s.crc, FirstLSN: s.base, LastLSN: s.lastLSN()}},
				cpFile{src: s.idxPath(), info: FileInfo{Name: idxFileName(s.base), Bytes: s.idxSize, CRC: s.idxCRC, FirstLSN: s.base, LastLSN: s.lastLSN()}})
			continue
		}
		// upTo is inside s: copy its records up to upTo.
		n := s.size
		if upTo < s.lastLSN() {
			if s.pos != nil {
				n = s.pos[upTo+1-s.base]
			} else {
				n = -1
			}
		}
		s.acquire()
		plan = append(plan, cpFile{seg: s, copyLen: n, info: FileInfo{Name: segFileName(s.base), FirstLSN: s.base, LastLSN: upTo}})
		break
	}
	if len(plan) == 0 || plan[len(plan)-1].seg == nil {
		// upTo ends a sealed segment (or precedes every record): the
		// checkpoint's active segment is a new empty file.
		plan = append(plan, cpFile{info: FileInfo{Name: segFileName(upTo + 1), FirstLSN: upTo + 1, LastLSN: upTo}})
	}
	return plan, m, nil
}

// positionAfter returns the byte position just after record lsn of the
// sealed segment s, found from the sparse index with a bounded scan.
func positionAfter(s *segment, lsn types.LSN) (int64, error) {
	e := s.idx.seekLSN(lsn)
	rr := newRecordReader(s.f, e.pos, s.size)
	defer rr.close()
	for l := e.lsn; l <= lsn; l++ {
		if _, at, err := rr.next(); err != nil {
			return 0, readErr(s, at, l, err)
		}
	}
	return rr.pos, nil
}

// emptyReader reads as a file with no bytes.
type emptyReader struct{}

func (emptyReader) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
