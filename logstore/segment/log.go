package segment

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/types"
)

// Defaults filled in by Options.validate.
const (
	// DefaultSegmentBytes: a segment is sealed (indexed, fsynced, and from
	// then on hard-linked by checkpoints) once it holds this much. Large
	// enough that sealing (one fsync of the file) is rare on the apply path;
	// small enough that the active segment, the one part a restart scans and
	// a checkpoint copies, stays cheap.
	DefaultSegmentBytes = 64 << 20
	// DefaultIndexIntervalBytes spaces the sparse LSN index: a Get or Read
	// from an LSN in a sealed segment scans at most this much (plus one
	// record). 64 KiB costs 24 bytes of memory per 64 KiB of data.
	DefaultIndexIntervalBytes = 64 << 10
	// DefaultTopicIndexIntervalBytes spaces each topic's offset index: a
	// TopicOffsetLSN scans at most this much. Coarser than the LSN index
	// because it is kept per topic (at most SegmentBytes/this entries per
	// topic and segment).
	DefaultTopicIndexIntervalBytes = 256 << 10
	// DefaultWritebackBytes: start the kernel's writeback every 1 MiB, so a
	// seal's fsync waits for about that much, not for a whole segment.
	DefaultWritebackBytes = 1 << 20
)

// Options configure a Log. The zero value of every field but Dir picks the
// default.
type Options struct {
	// Dir holds the segment files; required, created if missing. One Log
	// per directory.
	Dir string
	// SegmentBytes: the active segment is sealed and a new one started when
	// it has reached this size (checked before each record is appended). Every replica
	// must use the same value for their segment files to be identical.
	SegmentBytes int64
	// IndexIntervalBytes and TopicIndexIntervalBytes space the sparse
	// indexes (see the defaults).
	IndexIntervalBytes      int64
	TopicIndexIntervalBytes int64
	// WritebackBytes: after each this many bytes appended, the kernel is
	// asked to start writing them to disk (no wait, no durability), so that
	// sealing a segment does not stall the apply path flushing all of it.
	WritebackBytes int64
	// VerifyWrites reads every record back after writing it and panics when
	// it does not decode to the same LSN with a good CRC. For tests.
	VerifyWrites bool
	Logger       *slog.Logger
	// FS is the filesystem of Dir (and of checkpoint and install
	// directories); nil is the real one. Tests pass a crashable in-memory
	// one (vfs.NewCrashableMem) to simulate power loss.
	FS vfs.FS
}

func (o *Options) validate() error {
	if o.Dir == "" {
		return errors.New("segment: Options.Dir is required")
	}
	if o.SegmentBytes < 0 || o.IndexIntervalBytes < 0 || o.TopicIndexIntervalBytes < 0 || o.WritebackBytes < 0 {
		return fmt.Errorf("segment: negative size in options (segment %d, index interval %d, topic index interval %d, writeback %d)",
			o.SegmentBytes, o.IndexIntervalBytes, o.TopicIndexIntervalBytes, o.WritebackBytes)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.TopicIndexIntervalBytes == 0 {
		o.TopicIndexIntervalBytes = DefaultTopicIndexIntervalBytes
	}
	if o.WritebackBytes == 0 {
		o.WritebackBytes = DefaultWritebackBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return nil
}

var (
	// ErrBelowRetention: the LSN or offset asked for was deleted by
	// retention (or never existed below the oldest retained one).
	ErrBelowRetention = errors.New("segment: below retention")
	// ErrNotFound: the LSN is above LastLSN, or the topic or offset is not in
	// the retained log.
	ErrNotFound = errors.New("segment: not found")
	// ErrCorrupt: data that recovery cannot repair (a sealed segment, an index
	// file, a checkpoint file). Wrapped with the file, position and LSN.
	ErrCorrupt = errors.New("segment: corrupt")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("segment: log closed")
	// ErrNotDurable: an fsync (or the write of an index file) that would
	// have made the log durable failed. It is sticky: every later
	// AppendBatch, Sync and Checkpoint returns it, since after a failed
	// fsync the kernel may have dropped dirty pages and no later success
	// proves them written. The node must stop (the FSM panics on an append
	// error) and recover from its Raft log and snapshot on restart.
	ErrNotDurable = errors.New("segment: log cannot be made durable")
)

// installMarker exists in Dir while Install replaces its files; Open finding
// it discards the half-installed content.
const installMarker = "INSTALLING"

// Log is the segment log of one LogStore node. See the package doc for the
// concurrency contract.
type Log struct {
	opts Options
	fs   vfs.FS // == opts.FS
	log  *slog.Logger

	// wmu serializes the writer's methods (AppendBatch, TruncateAfterRaftIndex,
	// Install, Close). The writer reads mu.lastLSN, mu.lastRaft, mu.closed
	// and the active segment's fields without mu: only it changes them
	// (mu.segs it must not read without mu: DeleteBefore changes it).
	wmu sync.Mutex
	w   struct {
		active *segment // == mu.segs[len(mu.segs)-1]
		// writtenBack: writeback of the active segment was started up to
		// here.
		writtenBack int64
		buf         []byte     // reused frame buffer
		meta        recordMeta // reused parse of the frame
	}

	// fileMu serializes the operations that remove or replace files against
	// Checkpoint, which links them: DeleteBefore, TruncateAfterRaftIndex,
	// Install, Checkpoint, Close. AppendBatch never takes it (sealing only adds
	// files). Lock order: wmu, fileMu, mu.
	fileMu sync.Mutex

	// sealer makes sealed segments durable off the writer's path.
	sealer sealer

	// hooks are set by tests (before use) to run code between two steps
	// that another goroutine may interleave; nil in production.
	hooks struct {
		syncFlushed          func() // Sync: after flushSeals, before the active segment's fsync
		beforeCheckpointPlan func() // Checkpoint: before planCheckpoint
	}

	stats struct {
		seals            atomic.Uint64
		sealNanos        atomic.Int64
		sealSyncNanos    atomic.Int64
		truncatedBytes   atomic.Int64
		truncatedRecords atomic.Uint64
	}

	// below serves reads under the first retained LSN (SetBelow); nil
	// when none.
	below atomic.Pointer[Below]

	mu struct {
		sync.RWMutex
		// segs is never empty: oldest first, the last is the active one.
		// Bases are contiguous: segs[i+1].base == segs[i].lastLSN()+1.
		segs     []*segment
		lastLSN  types.LSN // == active().lastLSN()
		lastRaft uint64    // Raft index of the record lastLSN; 0 if none retained
		closed   bool
	}
}

// Open opens or creates the log in opts.Dir (its path made durable) and
// recovers it. Sealed segments
// are trusted through their index files (only the index files are read, and
// each sealed file's size checked): a sealed segment whose index is missing,
// fails its CRC or disagrees with the file is ErrCorrupt. The active (last)
// segment is scanned; a torn or corrupt tail is truncated at the last good
// record and logged with the number of bytes dropped.
func Open(opts Options) (*Log, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := vfs.MkdirAllSync(opts.FS, opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	l := &Log{opts: opts, fs: opts.FS, log: opts.Logger.With("component", "segment", "dir", opts.Dir)}
	segs, err := l.load()
	if err != nil {
		return nil, err
	}
	l.setSegs(segs)
	l.startSealer()
	return l, nil
}

// setSegs installs a new segment list and drops the Log's reference on the
// segments of the old list that the new one does not keep. The caller holds
// wmu (or owns l exclusively).
func (l *Log) setSegs(segs []*segment) {
	l.mu.Lock()
	old := l.mu.segs
	l.mu.segs = segs
	l.w.active = segs[len(segs)-1]
	l.w.writtenBack = l.w.active.size
	l.mu.lastLSN = segs[len(segs)-1].lastLSN()
	l.mu.lastRaft = 0
	for _, s := range slices.Backward(segs) {
		if s.count > 0 {
			l.mu.lastRaft = s.lastRaft
			break
		}
	}
	l.mu.Unlock()
	for _, s := range old {
		if !slices.Contains(segs, s) {
			s.release()
		}
	}
}

// load reads the directory: it discards a half-finished Install, removes
// temporary and orphaned index files, loads the sealed segments' indexes and
// recovers the active segment.
func (l *Log) load() (segs []*segment, err error) {
	dir := l.opts.Dir
	if _, err := l.fs.Stat(filepath.Join(dir, installMarker)); err == nil {
		if err := l.discardInstall(); err != nil {
			return nil, err
		}
	}
	names, err := l.fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	var bases []types.LSN
	idxs := map[types.LSN]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, tmpExt) {
			if err := l.fs.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("segment: %w", err)
			}
			continue
		}
		base, ext, ok := parseFileName(name)
		switch {
		case !ok:
		case ext == segExt:
			bases = append(bases, base)
		default:
			idxs[base] = true
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	defer func() {
		if err != nil {
			for _, s := range segs {
				s.release()
			}
			segs = nil
		}
	}()
	if len(bases) == 0 {
		bases = []types.LSN{1}
	}
	active := bases[len(bases)-1]
	for base := range idxs {
		// An index without its segment is left by DeleteBefore (it removes
		// the segment first); the active segment's is left by a crash while
		// sealing it, and is rebuilt when it is sealed again.
		if base == active || !slices.Contains(bases, base) {
			if err := l.fs.Remove(filepath.Join(dir, idxFileName(base))); err != nil {
				return nil, fmt.Errorf("segment: %w", err)
			}
		}
	}
	var prev *segment
	for i, base := range bases[:len(bases)-1] {
		if !idxs[base] {
			s, err := l.recoverUnsealed(base, prev, bases[i+1:])
			if err != nil {
				return segs, err
			}
			segs = append(segs, s)
			if !s.sealed {
				return segs, nil
			}
			prev = s
			continue
		}
		s, err := l.loadSealed(base, prev)
		if err != nil {
			return segs, err
		}
		segs = append(segs, s)
		prev = s
	}
	s, err := l.openActive(active, prev)
	if err != nil {
		return segs, err
	}
	return append(segs, s), nil
}

// loadSealed opens a sealed segment through its index file, without reading
// the segment's data.
func (l *Log) loadSealed(base types.LSN, prev *segment) (*segment, error) {
	dir := l.opts.Dir
	b, err := vfs.ReadFile(l.fs, filepath.Join(dir, idxFileName(base)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: sealed segment %s has no index file", ErrCorrupt, segFileName(base))
		}
		return nil, fmt.Errorf("segment: %w", err)
	}
	meta, x, err := unmarshalIndex(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", idxFileName(base), err)
	}
	if meta.base != base {
		return nil, fmt.Errorf("%w: %s describes segment %d", ErrCorrupt, idxFileName(base), meta.base)
	}
	if prev != nil && (base != prev.lastLSN()+1 || meta.firstRaft < prev.lastRaft) {
		return nil, fmt.Errorf("%w: segment %s (raft %d) does not follow %s (lsn %d, raft %d)",
			ErrCorrupt, segFileName(base), meta.firstRaft, segFileName(prev.base), prev.lastLSN(), prev.lastRaft)
	}
	f, err := l.fs.Open(filepath.Join(dir, segFileName(base)))
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() != meta.size {
		err = fmt.Errorf("%w: sealed segment %s has %d bytes, its index says %d", ErrCorrupt, segFileName(base), fi.Size(), meta.size)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return newSealedSegment(dir, f, meta, x, b), nil
}

// newSealedSegment makes the sealed segment of file f described by its
// index file's bytes b (decoded as meta and x).
func newSealedSegment(dir string, f vfs.File, meta sealedMeta, x segIndex, b []byte) *segment {
	s := newSegment(dir, meta.base, f)
	s.sealed = true
	s.count, s.size, s.crc = meta.count, meta.size, meta.crc
	s.firstRaft, s.lastRaft = meta.firstRaft, meta.lastRaft
	s.firstTime, s.lastTime = meta.firstTime, meta.lastTime
	s.idx = x
	s.idxSize, s.idxCRC = int64(len(b)), crc32.Checksum(b, crcTable)
	return s
}

// recoverUnsealed recovers the non-last segment base that has no index file:
// the writer sealed it, but the sealer had not made it durable (fsync, index
// file) when the node crashed, so after a power loss it may be torn or
// shorter than the segments after it assume. It is scanned like an active
// segment (truncated after its last good record). When it is whole (the next
// segment, later[0], starts right after its last record) its index file is
// written and it is returned sealed; otherwise the segments after it are
// removed (they no longer follow; Raft applies their records again, since
// they were above the last snapshot: a snapshot waits for every seal) and
// it is returned as the active segment.
func (l *Log) recoverUnsealed(base types.LSN, prev *segment, later []types.LSN) (*segment, error) {
	s, err := l.openActive(base, prev)
	if err != nil {
		return nil, err
	}
	if s.count > 0 && later[0] == s.lastLSN()+1 {
		data := marshalIndex(s.sealedMeta(), &s.idx)
		if err := l.syncSealed(s, data); err != nil {
			s.release()
			return nil, err
		}
		s.sealed, s.pos = true, nil
		s.idxSize, s.idxCRC = int64(len(data)), crc32.Checksum(data, crcTable)
		l.log.Warn("rebuilt the index of a segment whose seal did not finish", "segment", segFileName(base), "lsn", s.lastLSN())
		return s, nil
	}
	// Newest first, each segment before its index, so that a crash in
	// between leaves a log that this recovery finds again.
	for _, b := range slices.Backward(later) {
		if err := removeIfExists(l.fs, filepath.Join(l.opts.Dir, segFileName(b))); err != nil {
			s.release()
			return nil, err
		}
		if err := removeIfExists(l.fs, filepath.Join(l.opts.Dir, idxFileName(b))); err != nil {
			s.release()
			return nil, err
		}
	}
	if err := syncDir(l.fs, l.opts.Dir); err != nil {
		s.release()
		return nil, err
	}
	l.log.Warn("a segment whose seal did not finish is torn: it becomes the active segment and the later ones are dropped",
		"segment", segFileName(base), "lsn", s.lastLSN(), "dropped_segments", len(later))
	return s, nil
}

// openActive opens (creating it if needed) the active segment and rebuilds
// its index by scanning it.
func (l *Log) openActive(base types.LSN, prev *segment) (*segment, error) {
	path := filepath.Join(l.opts.Dir, segFileName(base))
	if prev != nil && base != prev.lastLSN()+1 {
		return nil, fmt.Errorf("%w: active segment %s does not follow %s (lsn %d)", ErrCorrupt, segFileName(base), segFileName(prev.base), prev.lastLSN())
	}
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	// The active segment is written in place; a file with other names (a
	// checkpoint's hard link) must not see those writes, so it gets a
	// private copy first.
	if n, err := linkCount(f); err != nil || n > 1 {
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil {
				var nf vfs.File
				nf, _, err = copyPrefix(l.fs, path, f, fi.Size())
				_ = f.Close()
				f = nf
			}
		}
		if err != nil {
			if f != nil {
				_ = f.Close()
			}
			return nil, err
		}
	}
	s := newSegment(l.opts.Dir, base, f)
	prevRaft := uint64(0)
	if prev != nil {
		prevRaft = prev.lastRaft
	}
	if err := l.recoverActive(s, prevRaft); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

// recoverActive scans the fresh segment s (not yet visible to readers),
// indexing its records, and truncates the file after the last good one.
func (l *Log) recoverActive(s *segment, prevRaft uint64) error {
	fi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	fileSize := fi.Size()
	rr := newRecordReader(s.f, 0, fileSize)
	defer rr.close()
	var m recordMeta
	var bad error
	for {
		frame, _, err := rr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = parseMeta(frame[headerBytes:], &m)
		}
		if err == nil {
			if cerr := s.check(&m, prevRaft); cerr != nil {
				err = fmt.Errorf("%w: %v", ErrCorrupt, cerr)
			}
		}
		if err != nil {
			bad = err
			break
		}
		s.add(frame, &m, &l.opts)
		prevRaft = m.raftIndex
	}
	if s.size == fileSize {
		return nil
	}
	if !errors.Is(bad, ErrCorrupt) && !errors.Is(bad, errTruncated) {
		// An I/O error, not a bad record: truncating would drop good data.
		return fmt.Errorf("segment: scan %s: %w", segFileName(s.base), bad)
	}
	l.stats.truncatedBytes.Add(fileSize - s.size)
	l.log.Warn("truncating torn or corrupt tail of the active segment",
		"segment", segFileName(s.base), "bytes", fileSize-s.size, "at", s.size,
		"lsn", s.lastLSN(), "reason", bad)
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("segment: truncate %s: %w", segFileName(s.base), err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", segFileName(s.base), err)
	}
	return nil
}

// discardInstall removes the segment files of an Install that did not finish.
func (l *Log) discardInstall() error {
	dir := l.opts.Dir
	names, err := l.fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	n := 0
	for _, name := range names {
		if _, _, ok := parseFileName(name); ok || strings.HasSuffix(name, tmpExt) {
			if err := l.fs.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
			n++
		}
	}
	l.log.Warn("discarding the files of an unfinished install", "files", n)
	if err := syncDir(l.fs, dir); err != nil {
		return err
	}
	if err := l.fs.Remove(filepath.Join(dir, installMarker)); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return syncDir(l.fs, dir)
}

// FirstLSN returns the oldest retained LSN; LastLSN()+1 when empty.
func (l *Log) FirstLSN() types.LSN {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.segs[0].base
}

// LastLSN returns the LSN of the last record; 0 when nothing was ever written.
func (l *Log) LastLSN() types.LSN {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.lastLSN
}

// LastRaftIndex returns the Raft index of the last record; 0 when no record
// is retained.
func (l *Log) LastRaftIndex() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.lastRaft
}

// FS is the filesystem of the log (Options.FS, vfs.Default if unset), of
// its checkpoint directories and of the directories it installs from.
func (l *Log) FS() vfs.FS { return l.fs }

// Segments describes every segment, oldest first; the last is the active one.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.mu.segs))
	for i, s := range l.mu.segs {
		out[i] = s.info()
	}
	return out
}

// SizeBytes returns the bytes of all segment and index files.
func (l *Log) SizeBytes() int64 { return l.Stats().Bytes }

// Stats are the log's figures for metrics (the caller exports them).
type Stats struct {
	Segments          int
	Bytes             int64 // segment and index files
	FirstLSN, LastLSN types.LSN
	// Seals counts segments sealed by AppendBatch since Open, and
	// SealTime the time the writer (the apply path) spent sealing them
	// (building the index, creating the next file; waiting when the sealer
	// is sealQueueMax behind). SealSyncTime is the sealer's time making
	// them durable (fsync, index file), off the apply path.
	Seals        uint64
	SealTime     time.Duration
	SealSyncTime time.Duration
	// TruncatedBytes counts bytes of torn or corrupt tail that recovery
	// dropped from the active segment (Open, TruncateAfterRaftIndex).
	TruncatedBytes int64
	// TruncatedRecords counts the whole records TruncateAfterRaftIndex
	// dropped (the values it returned).
	TruncatedRecords uint64
}

// Stats returns the log's current figures.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	st := Stats{Segments: len(l.mu.segs), FirstLSN: l.mu.segs[0].base, LastLSN: l.mu.lastLSN}
	for _, s := range l.mu.segs {
		st.Bytes += s.size + s.idxSize
	}
	l.mu.RUnlock()
	st.Seals = l.stats.seals.Load()
	st.SealTime = time.Duration(l.stats.sealNanos.Load())
	st.SealSyncTime = time.Duration(l.stats.sealSyncNanos.Load())
	st.TruncatedBytes = l.stats.truncatedBytes.Load()
	st.TruncatedRecords = l.stats.truncatedRecords.Load()
	return st
}

// Sync makes everything appended so far durable: it waits for the sealer to
// make every segment sealed so far durable, then fsyncs the active segment
// and the directory. A failure is sticky (ErrNotDurable).
func (l *Log) Sync() error {
	l.mu.RLock()
	if l.mu.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	// The active segment is taken before the wait for the sealer: a seal
	// after this point makes another segment active, but the one taken
	// here, which holds the records appended before the call, is fsynced;
	// every segment sealed before it was queued before it was published,
	// so flushSeals waits for it.
	s := l.mu.segs[len(l.mu.segs)-1]
	s.acquire()
	l.mu.RUnlock()
	defer s.release()
	if err := l.flushSeals(); err != nil {
		return err
	}
	if l.hooks.syncFlushed != nil {
		l.hooks.syncFlushed()
	}
	if err := failpoint.Inject(failpoint.SegmentSync); err != nil {
		return l.fail(fmt.Errorf("segment: sync %s: %w", segFileName(s.base), err))
	}
	if err := s.f.Sync(); err != nil {
		return l.fail(fmt.Errorf("segment: sync %s: %w", segFileName(s.base), err))
	}
	if err := syncDir(l.fs, l.opts.Dir); err != nil {
		return l.fail(err)
	}
	return nil
}

// Close closes the log. Reads in progress finish; later calls return
// ErrClosed. It lets the sealer finish the seals already queued (fsyncs of
// sealed segments) but does not fsync the active segment (call Sync first
// if needed).
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.closed = true
	segs := l.mu.segs
	l.mu.Unlock()
	l.stopSealer()
	for _, s := range segs {
		s.release()
	}
	return nil
}

func (l *Log) segPath(base types.LSN) string { return filepath.Join(l.opts.Dir, segFileName(base)) }

// active returns the active segment. Writer only.
func (l *Log) active() *segment { return l.w.active }
