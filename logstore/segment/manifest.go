package segment

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/internal/jsoncrc"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/types"
)

// Manifest lists the files of a checkpoint: every retained segment from
// FirstLSN to LastLSN, each sealed one followed by its index file, the last
// one a private copy (the checkpoint's active segment, never a link). It is
// enough to verify a copy of the files (Verify) and to stream them to
// another node (WriteFiles, ReadFiles) for Install.
type Manifest struct {
	FirstLSN types.LSN `json:"first_lsn"`
	// LastLSN is the checkpoint's upTo; FirstLSN-1 when it holds no record.
	LastLSN types.LSN `json:"last_lsn"`
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
	FirstLSN types.LSN `json:"first_lsn"`
	LastLSN  types.LSN `json:"last_lsn"`
}

// Bytes returns the total size of the checkpoint's files.
func (m Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return n
}

// manifestJSON is a manifest's encoding (manifest.json, and the manifest
// of a snapshot archive): the manifest's fields and the CRC-32C of them
// (internal/jsoncrc). Readers before the checksum ignore the extra field.
type manifestJSON struct {
	Manifest
	CRC *uint32 `json:"crc32c,omitempty"`
}

// Marshal encodes m as JSON carrying its own CRC-32C (UnmarshalManifest
// reads it).
func (m Manifest) Marshal() ([]byte, error) {
	f := manifestJSON{Manifest: m}
	return jsoncrc.Marshal(&f, &f.CRC)
}

// UnmarshalManifest decodes what Marshal wrote and checks its checksum
// and its shape (Validate). A manifest without a checksum (written by a
// release before it had one) is accepted only with legacy true: when the
// bytes come with a checksum of their own (a snapshot archive's header)
// or from a snapshot whose metadata says it predates them. Errors wrap
// ErrCorrupt.
func UnmarshalManifest(b []byte, legacy bool) (Manifest, error) {
	var f manifestJSON
	err := jsoncrc.Unmarshal(b, &f, &f.CRC)
	if errors.Is(err, jsoncrc.ErrMissing) && legacy {
		err = nil
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	return f.Manifest, f.validate()
}

// Validate checks the manifest's shape (see validate); errors wrap
// ErrCorrupt.
func (m Manifest) Validate() error { return m.validate() }

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
		if err := verifyFile(vfs.Default, filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return nil
}

func verifyFile(fs vfs.FS, path string, f FileInfo) error {
	n, crc, err := fileCRC(fs, path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if n != f.Bytes || crc != f.CRC {
		return fmt.Errorf("%w: %s has %d bytes crc 0x%08x, manifest says %d bytes crc 0x%08x", ErrCorrupt, f.Name, n, crc, f.Bytes, f.CRC)
	}
	return nil
}

// WriteFiles writes the files of m from dir (on fsys) to w, one after the other in
// manifest order with no framing (m gives every size), checking each file's
// CRC on the way. Send m itself first, by any encoding.
func (m Manifest) WriteFiles(fsys vfs.FS, w io.Writer, dir string) (int64, error) {
	if err := m.validate(); err != nil {
		return 0, err
	}
	var total int64
	for _, f := range m.Files {
		in, err := fsys.Open(filepath.Join(dir, f.Name))
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

// ReadFiles reads what WriteFiles wrote from r into dir (on fsys, created
// if missing), checking each file's size and CRC, and fsyncs the files and dir.
// Then Install(dir, m) installs them.
func (m Manifest) ReadFiles(fsys vfs.FS, r io.Reader, dir string) error {
	if err := m.validate(); err != nil {
		return err
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	for _, f := range m.Files {
		if err := readFile(fsys, r, filepath.Join(dir, f.Name), f); err != nil {
			return err
		}
	}
	return syncDir(fsys, dir)
}

func readFile(fsys vfs.FS, r io.Reader, path string, f FileInfo) error {
	out, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
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
		return errors.Join(err, fsys.Remove(path))
	}
	return nil
}
