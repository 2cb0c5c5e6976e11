package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The snapshot archive (DESIGN.md §4) is the byte stream a leader sends a
// follower in InstallSnapshot:
//
//	"LPSNAP01" | u64 len | state (MarshalState) | u64 len | manifest JSON | segment files
//
// This package owns the header (magic, state, manifest bytes); the
// manifest's meaning and the files after it belong to the segment log
// (segment.Manifest.WriteFiles / ReadFiles), which logstore's snapshot
// store calls.
const (
	archiveMagic  = "LPSNAP01"
	maxHeaderPart = 1 << 30 // a state or manifest longer than this is corrupt
)

// ErrCorruptArchive marks an archive whose header does not parse.
var ErrCorruptArchive = errors.New("logstore: corrupt snapshot archive")

// ArchiveHeader returns the archive header of state and manifest bytes.
func ArchiveHeader(state, manifest []byte) []byte {
	hdr := make([]byte, 0, ArchiveHeaderSize(state, manifest))
	hdr = append(hdr, archiveMagic...)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(state)))
	hdr = append(hdr, state...)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(manifest)))
	return append(hdr, manifest...)
}

// ArchiveHeaderSize is len(ArchiveHeader(state, manifest)).
func ArchiveHeaderSize(state, manifest []byte) int64 {
	return int64(len(archiveMagic) + 8 + len(state) + 8 + len(manifest))
}

// ReadArchiveHeader reads the header that starts an archive and returns
// the decoded state and the manifest bytes; r is left at the first segment
// file. Errors wrap ErrCorruptArchive (a bad frame) or ErrCorruptState (a
// state that does not decode).
func ReadArchiveHeader(r io.Reader) (*State, []byte, error) {
	magic := make([]byte, len(archiveMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != archiveMagic {
		return nil, nil, fmt.Errorf("%w: bad magic (%v)", ErrCorruptArchive, err)
	}
	part := func(name string) ([]byte, error) {
		var n [8]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, fmt.Errorf("%w: %s length: %w", ErrCorruptArchive, name, err)
		}
		l := binary.BigEndian.Uint64(n[:])
		if l > maxHeaderPart {
			return nil, fmt.Errorf("%w: %s length %d", ErrCorruptArchive, name, l)
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorruptArchive, name, err)
		}
		return b, nil
	}
	sb, err := part("state")
	if err != nil {
		return nil, nil, err
	}
	mb, err := part("manifest")
	if err != nil {
		return nil, nil, err
	}
	st, err := UnmarshalState(sb)
	if err != nil {
		return nil, nil, err
	}
	return st, mb, nil
}
