package segment

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Manifest lists the files of a checkpoint: every retained segment from
// FirstLSN to LastLSN, each sealed one followed by its index file, the last
// one a private copy (the checkpoint's active segment, never a link). It is
// enough to verify a copy of the files (Verify) and to stream them to
// another node (WriteFiles, ReadFiles) for Install.
type Manifest struct {
	FirstLSN uint64 `json:"first_lsn"`
	// LastLSN is the checkpoint's upTo; FirstLSN-1 when it holds no record.
	LastLSN uint64 `json:"last_lsn"`
	// LastRaftIndex is the Raft index of the record LastLSN (0 if none).
	LastRaftIndex uint64     `json:"last_raft_index"`
	Files         []FileInfo `json:"files"`
}

// FileInfo describes one file of a checkpoint.
type FileInfo struct {
	// Name is a bare file name (segment or index naming, no directory).
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// CRC is the CRC-32C (Castagnoli) of the whole file.
	CRC uint32 `json:"crc32c"`
	// FirstLSN and LastLSN are the records of the segment the file belongs
	// to (LastLSN = FirstLSN-1 for an empty segment).
	FirstLSN uint64 `json:"first_lsn"`
	LastLSN  uint64 `json:"last_lsn"`
}

// Bytes returns the total size of the checkpoint's files.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return n
}

// validate checks the manifest's shape: file names in segment and index
// naming (so no path can escape a directory), contiguous segments, each
// sealed one with its index, the last one without.
func (m Manifest) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: manifest: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(m.Files) == 0 {
		return bad("no files")
	}
	next := m.FirstLSN
	for i := 0; i < len(m.Files); i++ {
		f := m.Files[i]
		base, ext, ok := parseFileName(f.Name)
		if !ok || ext != segExt {
			return bad("file %d is %q, want a segment", i, f.Name)
		}
		if base != next || f.FirstLSN != base || f.LastLSN+1 < base || f.Bytes < 0 {
			return bad("segment %q (lsn %d..%d, %d bytes) does not continue at lsn %d", f.Name, f.FirstLSN, f.LastLSN, f.Bytes, next)
		}
		next = f.LastLSN + 1
		if i == len(m.Files)-1 {
			break
		}
		i++
		x := m.Files[i]
		if x.Name != idxFileName(base) || x.FirstLSN != f.FirstLSN || x.LastLSN != f.LastLSN || x.Bytes <= 0 {
			return bad("sealed segment %q is followed by %q, want its index", f.Name, x.Name)
		}
		if i == len(m.Files)-1 {
			return bad("the last file is an index")
		}
	}
	if next != m.LastLSN+1 {
		return bad("files end at lsn %d, manifest says %d", next-1, m.LastLSN)
	}
	return nil
}

// Verify checks that dir holds every file of m with its size and CRC (it
// reads them all). Errors wrap ErrCorrupt.
func (m Manifest) Verify(dir string) error {
	if err := m.validate(); err != nil {
		return err
	}
	for _, f := range m.Files {
		if err := verifyFile(filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return nil
}

func verifyFile(path string, f FileInfo) error {
	n, crc, err := fileCRC(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if n != f.Bytes || crc != f.CRC {
		return fmt.Errorf("%w: %s has %d bytes crc 0x%08x, manifest says %d bytes crc 0x%08x", ErrCorrupt, f.Name, n, crc, f.Bytes, f.CRC)
	}
	return nil
}

// cpFile is one file of a checkpoint being made: linked from the log (src
// set), or the first copyLen bytes of seg copied (the last segment).
type cpFile struct {
	info    FileInfo
	src     string
	seg     *segment
	copyLen int64
}

// Checkpoint syncs the log, then fills dir (created if missing; it must hold
// no segment files) with a point-in-time copy of the log from FirstLSN up to
// the record upTo: sealed segments wholly at or below upTo and their index
// files are hard-linked (sealed files are immutable), the segment holding
// upTo contributes a copy of its bytes up to upTo, and when upTo ends a
// sealed segment an empty segment file follows it. It returns the manifest
// of dir. upTo below FirstLSN-1 is ErrBelowRetention, above LastLSN
// ErrNotFound. Appends go on meanwhile; DeleteBefore, TruncateAfterRaftIndex
// and Install wait.
func (l *Log) Checkpoint(dir string, upTo uint64) (Manifest, error) {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if err := l.Sync(); err != nil {
		return Manifest{}, err
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("segment: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("segment: %w", err)
	}
	for _, e := range entries {
		if _, _, ok := parseFileName(e.Name()); ok {
			return Manifest{}, fmt.Errorf("segment: checkpoint dir %s already holds %s", dir, e.Name())
		}
	}
	for i := range plan {
		f := &plan[i]
		dst := filepath.Join(dir, f.info.Name)
		switch {
		case f.src != "":
			if err := os.Link(f.src, dst); err != nil {
				if !isCrossDevice(err) {
					return Manifest{}, fmt.Errorf("segment: checkpoint: %w", err)
				}
				l.log.Warn("checkpoint dir on another device: copying a sealed file instead of linking it", "file", f.info.Name, "bytes", f.info.Bytes)
				src, err := os.Open(f.src)
				if err != nil {
					return Manifest{}, fmt.Errorf("segment: checkpoint: %w", err)
				}
				nf, _, err := copyPrefix(dst, src, f.info.Bytes)
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
			nf, crc, err := copyPrefix(dst, src, f.copyLen)
			if err != nil {
				return Manifest{}, err
			}
			_ = nf.Close()
			f.info.CRC = crc
		}
		m.Files = append(m.Files, f.info)
	}
	if err := syncDir(dir); err != nil {
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
func (l *Log) planCheckpoint(upTo uint64) ([]cpFile, Manifest, error) {
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
func positionAfter(s *segment, lsn uint64) (int64, error) {
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

// Install replaces the log's content with the checkpoint described by m,
// whose files are in srcDir (ReadFiles wrote them there, or Checkpoint did).
// Local files identical to the manifest's (same name, size and CRC) are kept
// as they are; the others are verified in srcDir (size and CRC) before
// anything changes, then hard-linked into the log's directory (the last
// segment, which the log will append to, is copied). A crash in the middle
// leaves a marker that makes Open discard the half-installed files (the log
// then starts empty, and the caller installs again). Readers in progress
// finish on the old files; srcDir is left as it was.
func (l *Log) Install(srcDir string, m Manifest) error {
	if err := m.validate(); err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	local := map[string]FileInfo{}
	for _, s := range l.mu.segs {
		local[segFileName(s.base)] = FileInfo{Name: segFileName(s.base), Bytes: s.size, CRC: s.crc}
		if s.sealed {
			local[idxFileName(s.base)] = FileInfo{Name: idxFileName(s.base), Bytes: s.idxSize, CRC: s.idxCRC}
		}
	}
	same := func(f FileInfo) bool {
		lf, ok := local[f.Name]
		return ok && lf.Bytes == f.Bytes && lf.CRC == f.CRC
	}
	for _, f := range m.Files {
		if !same(f) {
			if err := verifyFile(filepath.Join(srcDir, f.Name), f); err != nil {
				return err
			}
		}
	}
	dir := l.opts.Dir
	if err := writeFileDurable(filepath.Join(dir, installMarker), nil); err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, f := range m.Files {
		keep[f.Name] = same(f)
	}
	for name := range local {
		if !keep[name] {
			if err := removeIfExists(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	for i, f := range m.Files {
		if keep[f.Name] {
			continue
		}
		src, dst := filepath.Join(srcDir, f.Name), filepath.Join(dir, f.Name)
		if err := removeIfExists(dst); err != nil {
			return err
		}
		if i < len(m.Files)-1 {
			if err := os.Link(src, dst); err == nil {
				continue
			} else if !isCrossDevice(err) {
				return fmt.Errorf("segment: install: %w", err)
			}
		}
		in, err := os.Open(src)
		if err != nil {
			return fmt.Errorf("segment: install: %w", err)
		}
		nf, crc, err := copyPrefix(dst, in, f.Bytes)
		_ = in.Close()
		if err != nil {
			return err
		}
		_ = nf.Close()
		if crc != f.CRC {
			return fmt.Errorf("%w: install: %s changed while copied", ErrCorrupt, f.Name)
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, installMarker)); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	segs, err := l.load()
	if err != nil {
		return fmt.Errorf("segment: after install: %w", err)
	}
	l.setSegs(segs)
	l.log.Info("installed checkpoint", "first_lsn", m.FirstLSN, "lsn", m.LastLSN, "files", len(m.Files), "bytes", m.Bytes())
	return nil
}

// WriteFiles writes the files of m from dir to w, one after the other in
// manifest order with no framing (m gives every size), checking each file's
// CRC on the way. Send m itself first, by any encoding.
func (m Manifest) WriteFiles(w io.Writer, dir string) (int64, error) {
	if err := m.validate(); err != nil {
		return 0, err
	}
	var total int64
	for _, f := range m.Files {
		in, err := os.Open(filepath.Join(dir, f.Name))
		if err != nil {
			return total, fmt.Errorf("segment: %w", err)
		}
		h := crc32.New(crcTable)
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(in, f.Bytes))
		_ = in.Close()
		total += n
		if err == nil && (n != f.Bytes || h.Sum32() != f.CRC) {
			err = fmt.Errorf("%w: %s: sent %d bytes crc 0x%08x, manifest says %d bytes crc 0x%08x", ErrCorrupt, f.Name, n, h.Sum32(), f.Bytes, f.CRC)
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ReadFiles reads what WriteFiles wrote from r into dir (created if
// missing), checking each file's size and CRC, and fsyncs the files and dir.
// Then Install(dir, m) installs them.
func (m Manifest) ReadFiles(r io.Reader, dir string) error {
	if err := m.validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	for _, f := range m.Files {
		if err := readFile(r, filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

func readFile(r io.Reader, path string, f FileInfo) error {
	out, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	h := crc32.New(crcTable)
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Bytes))
	if err == nil && (n != f.Bytes || h.Sum32() != f.CRC) {
		err = fmt.Errorf("%w: %s: received %d bytes crc 0x%08x, manifest says %d bytes crc 0x%08x", ErrCorrupt, f.Name, n, h.Sum32(), f.Bytes, f.CRC)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, os.Remove(path))
	}
	return nil
}
