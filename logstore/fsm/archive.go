package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The snapshot archive (docs/DESIGN.md, "Snapshots and retention") is the byte stream a leader sends a
// follower in InstallSnapshot:
//
//	"LPSNAP02" | u64 len | state (MarshalState) | u64 len | manifest JSON |
//	u32 CRC-32C (Castagnoli) of the header before it | segment files
//
// all big-endian. This package owns the header (magic, state, manifest
// bytes, checksum); the manifest's meaning and the files after it belong
// to the segment log (segment.Manifest.WriteFiles / ReadFiles, each file
// with its CRC-32C in the manifest), which logstore's snapshot store calls.
//
// Format 1 ("LPSNAP01", releases before the checksum) is the same without
// the CRC. It is still read, so that a follower upgraded first can install
// a snapshot from a leader not yet upgraded (and a node can start from a
// snapshot it received before its upgrade); its header is then unchecked.
// A follower not yet upgraded cannot read format 2: in a rolling upgrade it
// may need a snapshot only if it falls behind the leader's trailing logs
// (README, Rolling upgrade). The two magics differ in two bits, so no
// single flipped bit makes a format 2 header pass as format 1.
const (
	archiveMagic   = "LPSNAP02"
	archiveMagicV1 = "LPSNAP01"
	archiveCRCSize = 4
	maxHeaderPart  = 1 << 30 // a state or manifest longer than this is corrupt
)

// ErrCorruptArchive marks an archive whose header does not parse or fails
// its checksum.
var ErrCorruptArchive = errors.New("logstore: corrupt snapshot archive")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ArchiveHeader returns the archive header of state and manifest bytes.
func ArchiveHeader(state, manifest []byte) []byte {
	hdr := make([]byte, 0, ArchiveHeaderSize(state, manifest))
	hdr = append(hdr, archiveMagic...)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(state)))
	hdr = append(hdr, state...)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(manifest)))
	hdr = append(hdr, manifest...)
	return binary.BigEndian.AppendUint32(hdr, crc32.Checksum(hdr, castagnoli))
}

// ArchiveHeaderSize is len(ArchiveHeader(state, manifest)).
func ArchiveHeaderSize(state, manifest []byte) int64 {
	return int64(len(archiveMagic) + 8 + len(state) + 8 + len(manifest) + archiveCRCSize)
}

// ReadArchiveHeader reads the header that starts an archive (format 2, or
// format 1 without a checksum) and returns the decoded state and the
// manifest bytes; r is left at the first segment file. Errors wrap
// ErrCorruptArchive (a bad frame or checksum) or ErrCorruptState (a state
// that does not decode).
func ReadArchiveHeader(r io.Reader) (*State, []byte, error) {
	crc := crc32.New(castagnoli)
	tr := io.TeeReader(r, crc)
	magic := make([]byte, len(archiveMagic))
	if _, err := io.ReadFull(tr, magic); err != nil || (string(magic) != archiveMagic && string(magic) != archiveMagicV1) {
		return nil, nil, fmt.Errorf("%w: bad magic %q (%v)", ErrCorruptArchive, magic, err)
	}
	part := func(name string) ([]byte, error) {
		var n [8]byte
		if _, err := io.ReadFull(tr, n[:]); err != nil {
			return nil, fmt.Errorf("%w: %s length: %w", ErrCorruptArchive, name, err)
		}
		l := binary.BigEndian.Uint64(n[:])
		if l > maxHeaderPart {
			return nil, fmt.Errorf("%w: %s length %d", ErrCorruptArchive, name, l)
		}
		// Grown as bytes arrive: a corrupt length costs what the stream holds,
		// not the length.
		var b bytes.Buffer
		if n, err := io.CopyN(&b, tr, int64(l)); err != nil {
			return nil, fmt.Errorf("%w: %s: %d of %d bytes: %w", ErrCorruptArchive, name, n, l, err)
		}
		return b.Bytes(), nil
	}
	sb, err := part("state")
	if err != nil {
		return nil, nil, err
	}
	mb, err := part("manifest")
	if err != nil {
		return nil, nil, err
	}
	if string(magic) == archiveMagic {
		var sum [archiveCRCSize]byte
		if _, err := io.ReadFull(r, sum[:]); err != nil {
			return nil, nil, fmt.Errorf("%w: checksum: %w", ErrCorruptArchive, err)
		}
		if got, want := crc.Sum32(), binary.BigEndian.Uint32(sum[:]); got != want {
			return nil, nil, fmt.Errorf("%w: header has crc32c 0x%08x, the archive says 0x%08x", ErrCorruptArchive, got, want)
		}
	}
	st, err := UnmarshalState(sb)
	if err != nil {
		return nil, nil, err
	}
	return st, mb, nil
}
