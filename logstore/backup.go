package logstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/api"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Backups (logplayer backup save/restore).
//
// A backup file is a header, a snapshot archive (the stream Raft sends a new
// voter: fsm.ArchiveHeader with the FSMState bytes fsm.MarshalState wrote and
// the segment manifest, then every retained segment file) and a trailer:
//
//	magic "LPBACKUP" | version u32 | raft index u64 | raft term u64 |
//	first LSN u64 | last LSN u64 | archive length u64 | archive |
//	CRC-32C (Castagnoli) u32 of everything before it
//
// all big-endian. The archive's manifest carries each segment file's CRC-32C
// too; VerifyBackup checks both, and the LSN range against the state's.
//
// Restore writes the archive as the newest snapshot of a fresh data
// directory (kind archive, the source's Raft index, Raft term 1 and the new
// cluster's voters as its configuration; the state's members table emptied,
// so that nothing names the source cluster's addresses). The node's start (recover) installs
// its segments and loads its state; Raft starts from that snapshot with an
// empty log, so it neither bootstraps nor replays: the new cluster's first
// election is at term 1, which is not below the snapshot's term, so the Raft
// log stays term-monotonic.
const (
	backupMagic      = "LPBACKUP"
	backupVersion    = 1
	backupHeaderSize = len(backupMagic) + 4 + 5*8
	backupTrailer    = 4
	backupChunkBytes = api.BackupChunkBytes
)

// ErrBadBackup marks a backup file that is truncated, corrupt or of an
// unknown format: nothing was written.
var ErrBadBackup = errors.New("logstore: bad backup file")

// ErrDataDirNotEmpty is a restore into a directory that already holds data.
var ErrDataDirNotEmpty = errors.New("logstore: data directory is not empty")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// restoreOpened, when set (tests), runs once RestoreBackup has opened the
// backup file, before it reads it.
var restoreOpened func(path string)

// BackupInfo is a backup file's header.
type BackupInfo struct {
	Version      uint32
	RaftIndex    uint64
	RaftTerm     uint64
	FirstLSN     types.LSN
	LastLSN      types.LSN
	ArchiveBytes int64
}

func (b BackupInfo) header() []byte {
	h := make([]byte, 0, backupHeaderSize)
	h = append(h, backupMagic...)
	h = binary.BigEndian.AppendUint32(h, b.Version)
	for _, v := range []uint64{b.RaftIndex, b.RaftTerm, uint64(b.FirstLSN), uint64(b.LastLSN), uint64(b.ArchiveBytes)} {
		h = binary.BigEndian.AppendUint64(h, v)
	}
	return h
}

func parseBackupHeader(h []byte) (BackupInfo, error) {
	var b BackupInfo
	if len(h) < backupHeaderSize || string(h[:len(backupMagic)]) != backupMagic {
		return b, fmt.Errorf("%w: not a LogPlayer backup (bad magic)", ErrBadBackup)
	}
	h = h[len(backupMagic):]
	b.Version = binary.BigEndian.Uint32(h)
	if b.Version != backupVersion {
		return b, fmt.Errorf("%w: format version %d, this build reads %d", ErrBadBackup, b.Version, backupVersion)
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(h[4+8*i:]) }
	b.RaftIndex, b.RaftTerm, b.FirstLSN, b.LastLSN = u(0), u(1), types.LSN(u(2)), types.LSN(u(3))
	if u(4) > 1<<62 {
		return b, fmt.Errorf("%w: archive length %d", ErrBadBackup, u(4))
	}
	b.ArchiveBytes = int64(u(4))
	return b, nil
}

// BackupWriter writes a backup file: the header, then the archive (Write),
// then the trailer (Close, which checks the archive's length).
type BackupWriter struct {
	w       io.Writer
	info    BackupInfo
	crc     hash.Hash32
	written int64
}

// NewBackupWriter writes info's header to w.
func NewBackupWriter(w io.Writer, info BackupInfo) (*BackupWriter, error) {
	info.Version = backupVersion
	bw := &BackupWriter{w: w, info: info, crc: crc32.New(castagnoli)}
	h := info.header()
	bw.crc.Write(h)
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	return bw, nil
}

// Write appends archive bytes.
func (b *BackupWriter) Write(p []byte) (int, error) {
	if b.written+int64(len(p)) > b.info.ArchiveBytes {
		return 0, fmt.Errorf("%w: archive longer than the %d bytes announced", ErrBadBackup, b.info.ArchiveBytes)
	}
	n, err := b.w.Write(p)
	b.crc.Write(p[:n])
	b.written += int64(n)
	return n, err
}

// Close writes the trailer; the archive must be complete.
func (b *BackupWriter) Close() error {
	if b.written != b.info.ArchiveBytes {
		return fmt.Errorf("%w: archive is %d bytes, %d announced", ErrBadBackup, b.written, b.info.ArchiveBytes)
	}
	_, err := b.w.Write(binary.BigEndian.AppendUint32(nil, b.crc.Sum32()))
	return err
}

// VerifyBackup reads the whole backup file at path and checks its header,
// length, CRC-32C, the archive's header (its checksum, the state, the
// manifest's shape: segment and index file names, contiguous LSNs; the LSN
// range and Raft index against the backup's header) and every segment
// file's CRC, writing nothing. Errors wrap ErrBadBackup (or are the
// file's I/O errors).
func VerifyBackup(path string) (BackupInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return BackupInfo{}, err
	}
	defer f.Close()
	return readBackup(f, io.Discard)
}

// readBackup reads the backup file f once, from its start, checking all
// that VerifyBackup says, and writes its archive to w as a restore keeps
// it: with the state's members table emptied (the source cluster's API
// addresses must not be named in the new cluster's NOT_LEADER answers: a
// client would follow them to the old cluster; each new leader registers
// the new members, Node.registerMembers). What reaches w is what was
// checked; w holds a whole archive only when readBackup returns nil.
func readBackup(f *os.File, w io.Writer) (BackupInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return BackupInfo{}, err
	}
	h := make([]byte, backupHeaderSize)
	if _, err := io.ReadFull(f, h); err != nil {
		return BackupInfo{}, fmt.Errorf("%w: truncated header (%d bytes)", ErrBadBackup, fi.Size())
	}
	info, err := parseBackupHeader(h)
	if err != nil {
		return info, err
	}
	if want := int64(backupHeaderSize) + info.ArchiveBytes + backupTrailer; fi.Size() != want {
		return info, fmt.Errorf("%w: %d bytes, the header announces %d (truncated or padded)", ErrBadBackup, fi.Size(), want)
	}
	crc := crc32.New(castagnoli)
	crc.Write(h)
	archive := bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, info.ArchiveBytes), crc), backupChunkBytes)
	ah, _, err := readArchiveHeader(archive, info.RaftIndex)
	if err != nil {
		return info, fmt.Errorf("%w: %w", ErrBadBackup, err)
	}
	st, man := ah.state, ah.man
	if st.LastLSN() != info.LastLSN || man.FirstLSN != info.FirstLSN {
		return info, fmt.Errorf("%w: header says lsn %d..%d at raft index %d, archive holds %d..%d (state lsn %d, index %d)",
			ErrBadBackup, info.FirstLSN, info.LastLSN, info.RaftIndex, man.FirstLSN, man.LastLSN, st.LastLSN(), st.LastIndex())
	}
	newIncarnation(st) // a restored log is a new incarnation (incarnation.go)
	p := st.ToProto()
	p.Members = nil
	state, err := fsm.MarshalState(p)
	if err != nil {
		return info, err
	}
	if _, err := w.Write(fsm.ArchiveHeader(state, ah.mjson)); err != nil {
		return info, err
	}
	if err := verifyArchiveFiles(w, archive, man); err != nil {
		return info, fmt.Errorf("%w: %w", ErrBadBackup, err)
	}
	var tr [backupTrailer]byte
	if _, err := io.ReadFull(f, tr[:]); err != nil {
		return info, fmt.Errorf("%w: trailer: %w", ErrBadBackup, err)
	}
	if got := binary.BigEndian.Uint32(tr[:]); got != crc.Sum32() {
		return info, fmt.Errorf("%w: checksum 0x%08x, file says 0x%08x", ErrBadBackup, crc.Sum32(), got)
	}
	return info, nil
}

// RestoreBackup seeds dataDir (which must be missing or empty) with the
// backup file at path: the archive becomes the newest snapshot, with the
// given voters as its Raft configuration. Every node of a new cluster
// restored from the same file with the same voters starts with that log
// and state; a node restored with only itself as voter is a single-voter
// cluster that others join (cluster add).
//
// The file is read once: every part is checked (as VerifyBackup) while it
// is copied, so what is restored is what was checked; a file that fails a
// check (ErrBadBackup) leaves dataDir as it was.
func RestoreBackup(path, dataDir string, voters []Peer) (info BackupInfo, err error) {
	if len(voters) == 0 {
		return info, fmt.Errorf("%w: restore needs the new cluster's voters", ErrConfig)
	}
	in, err := os.Open(path)
	if err != nil {
		return info, err
	}
	defer in.Close()
	existed := true
	if ents, err := os.ReadDir(dataDir); err == nil && len(ents) > 0 {
		return info, fmt.Errorf("%w: %s", ErrDataDirNotEmpty, dataDir)
	} else if errors.Is(err, os.ErrNotExist) {
		existed = false
	} else if err != nil {
		return info, err
	}
	snaps := filepath.Join(dataDir, "snapshots")
	defer func() {
		if err == nil {
			return
		}
		if existed {
			os.RemoveAll(snaps)
		} else {
			os.RemoveAll(dataDir)
		}
	}()
	if restoreOpened != nil {
		restoreOpened(path)
	}
	if info, err = restoreArchiveFile(in, snaps, voters); err != nil {
		return info, err
	}
	for _, dir := range []string{dataDir, filepath.Dir(dataDir)} { // the new names, durable
		if err := vfs.SyncDir(vfs.Default, dir); err != nil {
			return info, err
		}
	}
	return info, nil
}

// restoreArchiveFile copies the backup in's archive into a new snapshot
// directory under snaps (readBackup) and makes it the newest snapshot:
// kind archive, the source's Raft index, term 1, voters.
func restoreArchiveFile(in *os.File, snaps string, voters []Peer) (BackupInfo, error) {
	stage := filepath.Join(snaps, "restore"+tmpSuffix)
	if err := vfs.MkdirAllSync(vfs.Default, stage, 0o755); err != nil {
		return BackupInfo{}, err
	}
	out, err := os.OpenFile(filepath.Join(stage, archiveFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return BackupInfo{}, err
	}
	bw := bufio.NewWriterSize(out, backupChunkBytes)
	info, err := readBackup(in, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return info, err
	}
	fi, err := os.Stat(filepath.Join(stage, archiveFile))
	if err != nil {
		return info, err
	}
	var conf raft.Configuration
	for _, p := range voters {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	id := fmt.Sprintf("1-%d-restored", info.RaftIndex)
	meta, err := marshalMeta(snapMeta{Kind: kindArchive, SnapshotMeta: raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax, ID: id, Index: info.RaftIndex, Term: 1,
		Configuration: conf, ConfigurationIndex: info.RaftIndex, Size: fi.Size(),
	}})
	if err != nil {
		return info, err
	}
	if err := writeFileSync(vfs.Default, filepath.Join(stage, metaFile), meta); err != nil {
		return info, err
	}
	if err := vfs.SyncDir(vfs.Default, stage); err != nil {
		return info, err
	}
	if err := os.Rename(stage, filepath.Join(snaps, id)); err != nil {
		return info, err
	}
	return info, vfs.SyncDir(vfs.Default, snaps)
}

// backupSnapshot takes a user snapshot (or, when nothing was applied since
// the newest one, uses it) and opens its archive stream.
func (n *Node) backupSnapshot() (*raft.SnapshotMeta, io.ReadCloser, error) {
	fut := n.raft.Snapshot()
	if err := fut.Error(); err == nil {
		return fut.Open()
	} else if !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, nil, err
	}
	metas, err := n.snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(metas) == 0 {
		return nil, nil, apierr.New(logstorepb.ErrorCode_INVALID_ARGUMENT, "backup: nothing was written yet", nil)
	}
	return n.snaps.Open(metas[0].ID)
}

// openBackup is api.Node's OpenBackup: the newest snapshot (taken now
// when there is something new) as a backup's summary and a reader of the
// whole archive, header included. The Cluster service's Backup
// (logstore/api/backup.go) streams it in chunks.
func (n *Node) openBackup() (*logstorepb.BackupInfo, io.ReadCloser, error) {
	meta, rc, err := n.backupSnapshot()
	if err != nil {
		return nil, nil, err
	}
	var hdr bytes.Buffer
	h, _, err := readArchiveHeader(io.TeeReader(rc, &hdr), meta.Index)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	st, man := h.state, h.man
	info := &logstorepb.BackupInfo{RaftIndex: meta.Index, RaftTerm: meta.Term,
		FirstLsn: uint64(man.FirstLSN), LastLsn: uint64(st.LastLSN()), ArchiveBytes: uint64(meta.Size)}
	return info, struct {
		io.Reader
		io.Closer
	}{io.MultiReader(&hdr, rc), rc}, nil
}
