package logstore

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/internal/jsoncrc"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Snapshots (docs/DESIGN.md, "Snapshots and retention"): a snapshot is a directory, not a blob.
//
// A local snapshot (taken by this node) holds meta.json, state.bin (the
// FSMState proto), manifest.json and data/, a segment.Checkpoint of the log
// up to the snapshot's LSN: sealed segments are hard links, only the active
// segment's prefix is copied, so a snapshot costs O(active segment), not
// O(retained data).
//
// A received snapshot (a leader's InstallSnapshot) holds meta.json and
// archive.bin, the byte stream the leader sent.
//
// The archive stream, which Open produces (lazily, file by file, for a local
// snapshot) and Restore consumes, is fsm.ArchiveHeader (state and manifest
// JSON) followed by the files (segment.Manifest.WriteFiles), so a new voter
// receives every retained segment along with the state.
//
// The store's files are on the node's Config.FS, the filesystem of its
// segment log: a local snapshot's data/ is a checkpoint of that log (its
// hard links must be on the same filesystem), and a restore stages the
// received segments through it (restoreArchive).
//
// Checksums (snapshot format 2): meta.json and manifest.json carry the
// CRC-32C of their own JSON (internal/jsoncrc), meta.json also the
// CRC-32C of state.bin, and the archive header its own (fsm.ArchiveHeader);
// segment files have theirs in the manifest. They are checked when the
// node starts (loadNewest, and every meta.json), when a snapshot is opened
// to be sent, when a received one is closed (the whole archive) and
// restored, and by a backup's restore. A snapshot written before format 2
// (meta.json without "format" and "crc32c") is read as before, unchecked,
// with a warning; the node's next snapshot is written with checksums and
// reap removes the old one in due course. No single flipped bit makes a
// format 2 meta.json pass as an older one (it would have to lose both
// fields).
//
// Crash leftovers: a snapshot being written is <id>.tmp, one being removed
// is renamed <id>.reap.tmp (and the directory fsynced) before its files
// are, so a crash leaves either a whole snapshot or a *.tmp directory;
// newSnapshotStore removes those, a directory without meta.json older than
// the newest snapshot (left by a release that removed snapshots in place),
// and the staging directories restore.tmp and export.tmp in the node
// directory. Anything else on disk that no snapshot accounts for is
// counted in logstore_snapshot_orphan_bytes.
const (
	metaFile       = "meta.json"
	stateFile      = "state.bin"
	manifestFile   = "manifest.json"
	dataDir        = "data"
	archiveFile    = "archive.bin"
	tmpSuffix      = ".tmp"
	reapSuffix     = ".reap" + tmpSuffix
	kindLocal      = "local"
	kindArchive    = "archive"
	restoreStage   = "restore.tmp"
	exportStage    = "export.tmp"
	snapshotFormat = 2
)

// ErrSnapshot wraps snapshot store errors.
var ErrSnapshot = errors.New("logstore: snapshot")

// ErrSnapshotCorrupt marks a snapshot file that fails its checksum or
// disagrees with the snapshot's other files. At start the node refuses
// with it, in one line naming the file and what to do.
var ErrSnapshotCorrupt = fmt.Errorf("%w: corrupt", ErrSnapshot)

// corruptAdvice ends every ErrSnapshotCorrupt message (README, Runbook).
const corruptAdvice = "rebuild this node from the others (cluster remove, an empty data directory, cluster add) or restore it from a backup: README, Runbook, \"A node refuses to start: logstore: snapshot: corrupt\""

// corruptFile is the ErrSnapshotCorrupt error for the file at path.
func corruptFile(path string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; %s", ErrSnapshotCorrupt, path, fmt.Sprintf(format, args...), corruptAdvice)
}

// snapMeta is meta.json.
type snapMeta struct {
	raft.SnapshotMeta
	Kind string `json:"kind"`
	// Format is snapshotFormat; 0 in a snapshot written before checksums.
	Format int `json:"format,omitempty"`
	// StateCRC is the CRC-32C of state.bin (kind local).
	StateCRC uint32 `json:"state_crc32c,omitempty"`
	// CRC is the CRC-32C of this JSON without it (internal/jsoncrc).
	CRC *uint32 `json:"crc32c,omitempty"`
}

// legacy reports a snapshot written before checksums.
func (m snapMeta) legacy() bool { return m.Format == 0 }

// marshalMeta encodes m as meta.json, at snapshotFormat with its checksum.
func marshalMeta(m snapMeta) ([]byte, error) {
	m.Format = snapshotFormat
	return jsoncrc.Marshal(&m, &m.CRC)
}

// unmarshalMeta decodes meta.json of snapshot id: its checksum must match,
// or the file must predate checksums (neither "format" nor "crc32c").
func unmarshalMeta(b []byte, id string) (snapMeta, error) {
	var m snapMeta
	err := jsoncrc.Unmarshal(b, &m, &m.CRC)
	if errors.Is(err, jsoncrc.ErrMissing) && m.legacy() {
		err = nil
	}
	switch {
	case err != nil:
		return m, err
	case m.Format != 0 && m.Format != snapshotFormat:
		return m, fmt.Errorf("snapshot format %d, this binary reads up to %d", m.Format, snapshotFormat)
	case m.ID != id:
		return m, fmt.Errorf("id %q in directory %q", m.ID, id)
	case !sameTermIndex(m):
		return m, fmt.Errorf("term %d index %d, its id says otherwise", m.Term, m.Index)
	case m.Kind != kindLocal && m.Kind != kindArchive:
		return m, fmt.Errorf("kind %q", m.Kind)
	}
	return m, nil
}

// snapshotStore is a raft.SnapshotStore of snapshot directories.
//
// A snapshot being streamed (Open, for InstallSnapshot to a follower) is
// pinned until its reader is closed: the archive writer opens each segment
// file only when it reaches it, so reap must not delete the directory
// under it, however many newer snapshots are taken meanwhile (a lagging
// follower or a new voter could otherwise never catch up under load:
// every retry starts over from the newest snapshot and loses the race
// again). A pinned snapshot beyond the newest retain is reaped when its
// last reader closes.
type snapshotStore struct {
	dir    string
	fs     vfs.FS
	retain int
	log    *slog.Logger
	now    func() time.Time

	// orphanBytes, when set, is logstore_snapshot_orphan_bytes (reap and
	// trimBefore update it).
	orphanBytes prometheus.Gauge

	// tiered: reap waits for the tier's snapshot uploads (snapshottier.go).
	tiered bool

	mu struct {
		sync.Mutex
		pins    map[string]int      // snapshot id -> open readers
		busy    map[string]struct{} // ids being removed or trimmed: Open refuses them
		writing map[string]struct{} // <id>.tmp directories of open sinks
		// uploaded is the newest snapshot the tier holds (tiered).
		uploaded string
	}
}

var _ raft.SnapshotStore = (*snapshotStore)(nil)

// newSnapshotStore opens the store in dir (the node directory's
// snapshots/) at the node's start: it removes crash leftovers (see the
// file comment; the staging directories are in dir's parent) and checks
// every meta.json, refusing (ErrSnapshotCorrupt) one that fails its
// checksum and a directory without one that is not older than the newest
// snapshot.
func newSnapshotStore(dir string, fsys vfs.FS, retain int, log *slog.Logger, now func() time.Time) (*snapshotStore, error) {
	// Durable in its parent (the node's start makes it so too): a
	// snapshot renamed into a directory a crash can drop would be lost.
	if err := vfs.MkdirAllSync(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	s := &snapshotStore{dir: dir, fs: fsys, retain: retain, log: log, now: now}
	s.mu.pins, s.mu.busy, s.mu.writing = map[string]int{}, map[string]struct{}{}, map[string]struct{}{}
	if err := s.removeLeftovers(); err != nil {
		return nil, err
	}
	return s, nil
}

// removeLeftovers is newSnapshotStore's cleanup and check.
func (s *snapshotStore) removeLeftovers() error {
	nodeDir := filepath.Dir(s.dir)
	for _, stage := range []string{restoreStage, exportStage} {
		if err := s.fs.RemoveAll(filepath.Join(nodeDir, stage)); err != nil {
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
	}
	names, err := s.fs.Subdirs(s.dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	var newest snapMeta
	var metaless []string
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, tmpSuffix): // a snapshot being written or removed
			if err := s.fs.RemoveAll(filepath.Join(s.dir, name)); err != nil {
				return fmt.Errorf("%w: %w", ErrSnapshot, err)
			}
			continue
		}
		m, err := s.readMeta(name)
		switch {
		case errors.Is(err, os.ErrNotExist):
			metaless = append(metaless, name)
		case err != nil:
			return err
		case newest.ID == "" || compareSnapshots(m, newest) > 0:
			newest = m
		}
	}
	for _, name := range metaless {
		term, index, ok := parseSnapshotID(name)
		if !ok {
			s.log.Warn("not a snapshot: left in place", "dir", filepath.Join(s.dir, name))
			continue
		}
		if newest.ID == "" || term > newest.Term || (term == newest.Term && index >= newest.Index) {
			return corruptFile(filepath.Join(s.dir, name, metaFile), "missing, and no newer snapshot exists")
		}
		s.log.Warn("removing a snapshot directory without meta.json (a removal cut short)", "dir", filepath.Join(s.dir, name))
		if err := s.fs.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
	}
	if err := vfs.SyncDir(s.fs, s.dir); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return nil
}

// compareSnapshots orders snapshots oldest first: by term, index, id.
func compareSnapshots(a, b snapMeta) int {
	return cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.Index, b.Index), cmp.Compare(a.ID, b.ID))
}

// sameTermIndex reports whether m's term and index are those in its id
// (List orders snapshots by them; an id of another shape is not checked).
func sameTermIndex(m snapMeta) bool {
	term, index, ok := parseSnapshotID(m.ID)
	return !ok || (term == m.Term && index == m.Index)
}

// parseSnapshotID returns the term and index in a snapshot id
// (term-index-suffix, as Create and RestoreBackup name them).
func parseSnapshotID(id string) (term, index uint64, ok bool) {
	parts := strings.SplitN(id, "-", 3)
	if len(parts) != 3 {
		return 0, 0, false
	}
	term, err1 := strconv.ParseUint(parts[0], 10, 64)
	index, err2 := strconv.ParseUint(parts[1], 10, 64)
	return term, index, err1 == nil && err2 == nil
}

// pin marks snapshot id as being read; false if it is being removed or
// trimmed.
func (s *snapshotStore) pin(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.busy[id]; ok {
		return false
	}
	s.mu.pins[id]++
	return true
}

// lock takes snapshot id for removal or trimming: false while a reader has
// it pinned or another lock holds it.
func (s *snapshotStore) lock(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, busy := s.mu.busy[id]; busy || s.mu.pins[id] > 0 {
		return false
	}
	s.mu.busy[id] = struct{}{}
	return true
}

func (s *snapshotStore) unlock(id string) {
	s.mu.Lock()
	delete(s.mu.busy, id)
	s.mu.Unlock()
}

// unpin releases one pin of id and reaps what is no longer needed.
func (s *snapshotStore) unpin(id string) {
	s.mu.Lock()
	if s.mu.pins[id]--; s.mu.pins[id] <= 0 {
		delete(s.mu.pins, id)
	}
	s.mu.Unlock()
	s.reap()
}

// pinnedReader releases its snapshot's pin once, when closed.
type pinnedReader struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *pinnedReader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}

// Create implements raft.SnapshotStore.
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version < raft.SnapshotVersionMin || version > raft.SnapshotVersionMax {
		return nil, fmt.Errorf("%w: unsupported snapshot version %d", ErrSnapshot, version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, s.now().UnixMilli())
	path := filepath.Join(s.dir, id+tmpSuffix)
	s.mu.Lock()
	s.mu.writing[id+tmpSuffix] = struct{}{}
	s.mu.Unlock()
	if err := s.fs.MkdirAll(path, 0o755); err != nil {
		s.doneWriting(path)
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return &snapSink{store: s, path: path, meta: snapMeta{SnapshotMeta: raft.SnapshotMeta{
		Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex,
	}}}, nil
}

// List implements raft.SnapshotStore: newest first.
func (s *snapshotStore) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.list()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, len(metas))
	for i := range metas {
		out[i] = &metas[i].SnapshotMeta
	}
	return out, nil
}

func (s *snapshotStore) list() ([]snapMeta, error) {
	names, err := s.fs.Subdirs(s.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	var metas []snapMeta
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) { // being written or removed
			continue
		}
		m, err := s.readMeta(name)
		if err != nil {
			s.log.Warn("skipping unreadable snapshot", "snapshot", name, "err", err)
			continue
		}
		metas = append(metas, m)
	}
	slices.SortFunc(metas, func(a, b snapMeta) int { return -compareSnapshots(a, b) }) // newest first, as raft expects
	return metas, nil
}

// readMeta reads snapshot id's meta.json: an error wrapping os.ErrNotExist
// when there is none, ErrSnapshotCorrupt when it does not check.
func (s *snapshotStore) readMeta(id string) (snapMeta, error) {
	path := filepath.Join(s.dir, id, metaFile)
	b, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		return snapMeta{}, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	m, err := unmarshalMeta(b, id)
	if err != nil {
		return m, corruptFile(path, "%v", err)
	}
	return m, nil
}

// readState reads and checks a local snapshot's state.bin against m.
func (s *snapshotStore) readState(m snapMeta) ([]byte, *fsm.State, error) {
	path := filepath.Join(s.dir, m.ID, stateFile)
	b, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		return nil, nil, corruptFile(path, "%v", err)
	}
	if got := crc32.Checksum(b, castagnoli); !m.legacy() && got != m.StateCRC {
		return nil, nil, corruptFile(path, "crc32c 0x%08x, meta.json says 0x%08x", got, m.StateCRC)
	}
	st, err := fsm.UnmarshalState(b)
	if err != nil {
		return nil, nil, corruptFile(path, "%v", err)
	}
	return b, st, nil
}

// readManifest reads and checks a local snapshot's manifest.json: its
// bytes and the manifest.
func (s *snapshotStore) readManifest(m snapMeta) ([]byte, segment.Manifest, error) {
	path := filepath.Join(s.dir, m.ID, manifestFile)
	b, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		return nil, segment.Manifest{}, corruptFile(path, "%v", err)
	}
	man, err := segment.UnmarshalManifest(b, m.legacy())
	if err != nil {
		return nil, man, corruptFile(path, "%v", err)
	}
	return b, man, nil
}

// checkOrder checks that a snapshot's parts describe one point of the log:
// the manifest ends at the state's LSN, its last record's Raft index is
// at most the state's last applied index, which is at most the snapshot's
// Raft index (index; math.MaxUint64 when there is no meta.json). inMeta
// says whether meta.json's index is the one off (else the manifest is).
func checkOrder(st *fsm.State, man segment.Manifest, index uint64) (inMeta bool, err error) {
	if man.LastLSN != st.LastLSN() || man.LastRaftIndex > st.LastIndex() {
		return false, fmt.Errorf("manifest ends at lsn %d (raft index %d), the state at lsn %d (raft index %d)",
			man.LastLSN, man.LastRaftIndex, st.LastLSN(), st.LastIndex())
	}
	if st.LastIndex() > index {
		return true, fmt.Errorf("meta.json says raft index %d, below its state's %d", index, st.LastIndex())
	}
	return false, nil
}

// Open implements raft.SnapshotStore: the archive stream of snapshot id.
// The snapshot is pinned (never reaped) until the reader is closed.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if !s.pin(id) {
		return nil, nil, fmt.Errorf("%w: snapshot %s is being removed", ErrSnapshot, id)
	}
	m, rc, err := s.open(id)
	if err != nil {
		s.unpin(id)
		return nil, nil, err
	}
	return m, &pinnedReader{ReadCloser: rc, release: func() { s.unpin(id) }}, nil
}

func (s *snapshotStore) open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	m, err := s.readMeta(id)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(s.dir, id)
	if m.Kind == kindArchive { // checked whole when it was received; the reader checks it again
		f, err := s.fs.Open(filepath.Join(dir, archiveFile))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		return &m.SnapshotMeta, f, nil
	}
	state, st, err := s.readState(m)
	if err != nil {
		return nil, nil, err
	}
	mjson, man, err := s.readManifest(m)
	if err != nil {
		return nil, nil, err
	}
	if err := checkLocalOrder(dir, st, man, m.Index); err != nil {
		return nil, nil, err
	}
	// The size of what is streamed, from the manifest read now: retention
	// may have trimmed the snapshot since meta.json was written.
	m.Size = archiveSize(state, mjson, man)
	pr, pw := io.Pipe()
	go func() { // one per open stream; ends when the reader closes or the files are sent
		bw := bufio.NewWriterSize(pw, 256<<10)
		err := writeArchive(bw, s.fs, state, mjson, man, filepath.Join(dir, dataDir))
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	return &m.SnapshotMeta, pr, nil
}

// checkLocalOrder is checkOrder for the local snapshot in dir, naming the
// file that is off.
func checkLocalOrder(dir string, st *fsm.State, man segment.Manifest, index uint64) error {
	inMeta, err := checkOrder(st, man, index)
	switch {
	case err == nil:
		return nil
	case inMeta:
		return corruptFile(filepath.Join(dir, metaFile), "%v", err)
	}
	return corruptFile(filepath.Join(dir, manifestFile), "%v", err)
}

// reap removes all but the newest retain snapshots, except those pinned
// by an open reader (their last Close reaps them) and, with a tier, those
// newer than the tier's upload (snapshottier.go), and what an earlier
// removal left (*.reap.tmp); then it counts the orphan bytes.
func (s *snapshotStore) reap() {
	metas, err := s.list()
	if err != nil {
		s.log.Warn("listing snapshots to reap", "err", err)
		return
	}
	for i, m := range metas {
		if i < s.retain {
			continue
		}
		if !s.reapable(metas, i) {
			continue // it waits for an upload of itself or a newer one
		}
		if !s.lock(m.ID) {
			continue // pinned: its last reader's Close reaps it
		}
		if err := s.remove(m.ID); err != nil { // outside s.mu: Open of another id never waits on this I/O
			s.log.Warn("reaping snapshot", "snapshot", m.ID, "err", err)
		}
		s.unlock(m.ID)
	}
	names, err := s.fs.Subdirs(s.dir)
	if err != nil {
		s.log.Warn("listing snapshots to reap", "err", err)
		return
	}
	for _, name := range names {
		if strings.HasSuffix(name, reapSuffix) && s.lock(name) {
			if err := s.fs.RemoveAll(filepath.Join(s.dir, name)); err != nil {
				s.log.Warn("removing a reaped snapshot", "dir", name, "err", err)
			}
			s.unlock(name)
		}
	}
	s.countOrphans()
}

// remove removes snapshot id: renamed out of List's sight first, durably,
// so that a crash in the middle of removing its files leaves a *.tmp
// directory (removed at start), never a snapshot directory without
// meta.json holding links to segments.
func (s *snapshotStore) remove(id string) error {
	gone := filepath.Join(s.dir, id+reapSuffix)
	if err := s.fs.Rename(filepath.Join(s.dir, id), gone); err != nil {
		return err
	}
	if err := vfs.SyncDir(s.fs, s.dir); err != nil {
		return err // the rename may not be durable: keep the files (a later reap or the start removes them)
	}
	return s.fs.RemoveAll(gone)
}

// countOrphans sets logstore_snapshot_orphan_bytes: the bytes under the
// store's directory that neither a snapshot List shows nor an open sink
// accounts for (a directory whose removal failed, one without a valid
// meta.json, anything else put there).
func (s *snapshotStore) countOrphans() {
	if s.orphanBytes == nil {
		return
	}
	names, err := s.fs.Subdirs(s.dir)
	if err != nil {
		s.log.Warn("counting orphan snapshot bytes", "err", err)
		return
	}
	var total int64
	for _, name := range names {
		s.mu.Lock()
		_, writing := s.mu.writing[name]
		s.mu.Unlock()
		if writing {
			continue
		}
		if !strings.HasSuffix(name, tmpSuffix) {
			if _, err := s.readMeta(name); err == nil {
				continue
			}
		}
		total += treeBytes(s.fs, filepath.Join(s.dir, name))
	}
	s.orphanBytes.Set(float64(total))
}

// treeBytes is the size of the files under dir (what can be read of it).
func treeBytes(fsys vfs.FS, dir string) int64 {
	var n int64
	files, _ := fsys.ReadDir(dir)
	for _, f := range files {
		if fi, err := fsys.Stat(filepath.Join(dir, f)); err == nil {
			n += fi.Size()
		}
	}
	subs, _ := fsys.Subdirs(dir)
	for _, d := range subs {
		n += treeBytes(fsys, filepath.Join(dir, d))
	}
	return n
}

// doneWriting forgets the sink directory path (closed or cancelled).
func (s *snapshotStore) doneWriting(path string) {
	s.mu.Lock()
	delete(s.mu.writing, filepath.Base(path))
	s.mu.Unlock()
}

// archiveSize is the length of the archive stream.
func archiveSize(state, mjson []byte, m segment.Manifest) int64 {
	return fsm.ArchiveHeaderSize(state, mjson) + m.Bytes()
}

func writeArchive(w io.Writer, fsys vfs.FS, state, mjson []byte, m segment.Manifest, dataDir string) error {
	if _, err := w.Write(fsm.ArchiveHeader(state, mjson)); err != nil {
		return err
	}
	_, err := m.WriteFiles(fsys, w, dataDir)
	return err
}

// archiveHeader is what starts an archive: the state, the manifest and
// the manifest's bytes.
type archiveHeader struct {
	state *fsm.State
	man   segment.Manifest
	mjson []byte
}

// readArchiveHeader reads and checks the header that starts an archive
// (checksum, state, manifest shape, checkOrder against a snapshot at Raft
// index: math.MaxUint64 when not known); inMeta reports an index the
// state is above. The caller wraps the error (ErrSnapshotCorrupt,
// ErrBadBackup).
func readArchiveHeader(r io.Reader, index uint64) (h archiveHeader, inMeta bool, err error) {
	st, mb, err := fsm.ReadArchiveHeader(r)
	if err != nil {
		return h, false, err
	}
	// The header's checksum covers the manifest (format 1 had none).
	man, err := segment.UnmarshalManifest(mb, true)
	if err != nil {
		return h, false, err
	}
	if inMeta, err := checkOrder(st, man, index); err != nil {
		return h, inMeta, err
	}
	return archiveHeader{state: st, man: man, mjson: mb}, false, nil
}

// verifyArchiveFiles reads the segment files that follow an archive's
// header from r, checking each against man, and that nothing follows
// them; what it reads is copied to w. The caller wraps the error, as for
// readArchiveHeader.
func verifyArchiveFiles(w io.Writer, r io.Reader, man segment.Manifest) error {
	for _, file := range man.Files {
		fc := crc32.New(castagnoli)
		n, err := io.Copy(io.MultiWriter(w, fc), io.LimitReader(r, file.Bytes))
		if err != nil {
			return err
		}
		if n != file.Bytes || fc.Sum32() != file.CRC {
			return fmt.Errorf("segment file %s: %d of %d bytes, crc32c 0x%08x, manifest says 0x%08x", file.Name, n, file.Bytes, fc.Sum32(), file.CRC)
		}
	}
	if n, _ := io.Copy(io.Discard, r); n != 0 {
		return fmt.Errorf("%d bytes after the last segment file", n)
	}
	return nil
}

// restoreArchive reads an archive stream, installs its segments into log
// (through a staging directory under nodeDir, on the log's filesystem) and
// returns its state. Every part is checked: the header (readArchiveHeader)
// and each segment file (Manifest.ReadFiles).
func restoreArchive(r io.Reader, log *segment.Log, nodeDir string) (*fsm.State, error) {
	h, _, err := readArchiveHeader(r, math.MaxUint64)
	if err != nil {
		return nil, fmt.Errorf("%w: archive: %w", ErrSnapshotCorrupt, err)
	}
	st, man := h.state, h.man
	fsys := log.FS()
	stage := filepath.Join(nodeDir, restoreStage)
	if err := fsys.RemoveAll(stage); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	defer fsys.RemoveAll(stage)
	if err := man.ReadFiles(fsys, r, stage); err != nil {
		return nil, fmt.Errorf("%w: receive segments: %w", ErrSnapshot, err)
	}
	if err := log.Install(stage, man); err != nil {
		return nil, fmt.Errorf("%w: install segments: %w", ErrSnapshot, err)
	}
	return st, nil
}

// snapSink is a snapshot being written: either by fsmSnapshot.Persist
// through finishLocal (a checkpoint in data/ and the state), or by Raft
// copying a leader's archive stream through Write.
type snapSink struct {
	store   *snapshotStore
	path    string
	meta    snapMeta
	archive vfs.File
	closed  bool
}

var _ raft.SnapshotSink = (*snapSink)(nil)

func (k *snapSink) ID() string { return k.meta.ID }

// dataPath is where Persist puts the segment checkpoint.
func (k *snapSink) dataPath() string { return filepath.Join(k.path, dataDir) }

// Write appends archive bytes (a snapshot received from the leader).
func (k *snapSink) Write(p []byte) (int, error) {
	if k.meta.Kind == kindLocal {
		return 0, fmt.Errorf("%w: write to a local snapshot sink", ErrSnapshot)
	}
	if k.archive == nil {
		f, err := k.store.fs.OpenFile(filepath.Join(k.path, archiveFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		k.archive, k.meta.Kind = f, kindArchive
	}
	n, err := k.archive.Write(p)
	k.meta.Size += int64(n)
	return n, err
}

// finishLocal records the state and checkpoint manifest of a local snapshot.
func (k *snapSink) finishLocal(state []byte, m segment.Manifest) error {
	if k.meta.Kind != "" {
		return fmt.Errorf("%w: sink already holds a %s snapshot", ErrSnapshot, k.meta.Kind)
	}
	mjson, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if err := writeFileSync(k.store.fs, filepath.Join(k.path, stateFile), state); err != nil {
		return err
	}
	if err := writeFileSync(k.store.fs, filepath.Join(k.path, manifestFile), mjson); err != nil {
		return err
	}
	k.meta.Kind, k.meta.Size = kindLocal, archiveSize(state, mjson, m)
	k.meta.StateCRC = crc32.Checksum(state, castagnoli)
	return nil
}

// verifyReceived reads back the archive a leader sent (closed and
// fsynced): header and every segment file must check, and the state must
// not be above the snapshot's Raft index, before the snapshot is visible.
func (k *snapSink) verifyReceived() error {
	f, err := k.store.fs.Open(filepath.Join(k.path, archiveFile))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	h, _, err := readArchiveHeader(r, k.meta.Index)
	if err == nil {
		err = verifyArchiveFiles(io.Discard, r, h.man)
	}
	if err != nil {
		return fmt.Errorf("%w: received snapshot %s: %w", ErrSnapshotCorrupt, k.meta.ID, err)
	}
	return nil
}

// Close makes the snapshot durable and visible, then reaps old ones.
func (k *snapSink) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	fsys := k.store.fs
	if k.archive != nil {
		err := failpoint.Inject(failpoint.SnapshotSync)
		if err == nil {
			err = k.archive.Sync()
		}
		if cerr := k.archive.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			k.discard()
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		if err := k.verifyReceived(); err != nil {
			k.discard()
			return err
		}
	}
	if k.meta.Kind == "" {
		k.discard()
		return fmt.Errorf("%w: closing an empty snapshot", ErrSnapshot)
	}
	mb, err := marshalMeta(k.meta)
	if err == nil {
		err = writeFileSync(fsys, filepath.Join(k.path, metaFile), mb)
	}
	if err == nil {
		err = vfs.SyncDir(fsys, k.path)
	}
	final := strings.TrimSuffix(k.path, tmpSuffix)
	if err == nil {
		err = fsys.Rename(k.path, final)
	}
	if err == nil {
		err = vfs.SyncDir(fsys, k.store.dir)
	}
	if err != nil {
		k.discard()
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	k.store.doneWriting(k.path)
	k.store.reap()
	return nil
}

// discard removes the sink's directory.
func (k *snapSink) discard() error {
	err := k.store.fs.RemoveAll(k.path)
	k.store.doneWriting(k.path)
	return err
}

// Cancel discards the snapshot.
func (k *snapSink) Cancel() error {
	k.closed = true
	if k.archive != nil {
		k.archive.Close()
	}
	return k.discard()
}

// writeFileSync writes b to path and fsyncs it (vfs.WriteFileSync, with
// the SnapshotSync failpoint before the fsync).
func writeFileSync(fsys vfs.FS, path string, b []byte) error {
	if err := vfs.WriteFileSync(fsys, path, b, snapshotSyncPoint); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return nil
}

func snapshotSyncPoint() error { return failpoint.Inject(failpoint.SnapshotSync) }

// fsmSnapshot is the state captured by raftFSM.Snapshot.
type fsmSnapshot struct {
	f     *raftFSM
	state *logstorepb.FSMState
}

// Persist checkpoints the segment log up to the snapshot's LSN (fsync, hard
// links for sealed segments) and writes the state. With a sink of another
// store (raft's user-restore paths) it streams the archive instead.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	err := s.persist(sink)
	if err != nil {
		sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	s.f.metrics.snapshotDuration.Observe(time.Since(start).Seconds())
	if s.f.durable.Load() < types.LSN(s.state.LastLsn) {
		s.f.durable.Store(types.LSN(s.state.LastLsn))
	}
	return nil
}

func (s *fsmSnapshot) persist(sink raft.SnapshotSink) error {
	state, err := fsm.MarshalState(s.state)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if k, ok := sink.(*snapSink); ok {
		m, err := s.f.log.Checkpoint(k.dataPath(), types.LSN(s.state.LastLsn))
		if err != nil {
			return fmt.Errorf("%w: checkpoint: %w", ErrSnapshot, err)
		}
		s.f.metrics.snapshotBytes.Set(float64(m.Bytes()))
		return k.finishLocal(state, m)
	}
	fsys := s.f.log.FS()
	stage := filepath.Join(s.f.dir, exportStage)
	if err := fsys.RemoveAll(stage); err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	defer fsys.RemoveAll(stage)
	m, err := s.f.log.Checkpoint(stage, types.LSN(s.state.LastLsn))
	if err != nil {
		return fmt.Errorf("%w: checkpoint: %w", ErrSnapshot, err)
	}
	mjson, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return writeArchive(sink, fsys, state, mjson, m, stage)
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

// localSnapshot is the newest snapshot in the store, loaded at start.
type localSnapshot struct {
	meta  snapMeta
	state *fsm.State
	man   segment.Manifest
	dir   string
}

// loadNewest reads the newest snapshot's state and manifest; nil when the
// store is empty. It is the snapshot Raft starts from (List order).
func (s *snapshotStore) loadNewest() (*localSnapshot, error) {
	metas, err := s.list()
	if err != nil || len(metas) == 0 {
		return nil, err
	}
	m := metas[0]
	dir := filepath.Join(s.dir, m.ID)
	if m.legacy() {
		s.log.Warn("the newest snapshot predates checksums: its files are not checked; the next snapshot will have them", "snapshot", m.ID)
	}
	if m.Kind == kindArchive {
		path := filepath.Join(dir, archiveFile)
		f, err := s.fs.Open(path)
		if err != nil {
			return nil, corruptFile(path, "%v", err)
		}
		h, inMeta, err := readArchiveHeader(bufio.NewReader(f), m.Index)
		f.Close()
		if err != nil {
			if inMeta {
				path = filepath.Join(dir, metaFile)
			}
			return nil, corruptFile(path, "%v", err)
		}
		return &localSnapshot{meta: m, state: h.state, man: h.man, dir: dir}, nil
	}
	_, st, err := s.readState(m)
	if err != nil {
		return nil, err
	}
	_, man, err := s.readManifest(m)
	if err != nil {
		return nil, err
	}
	if err := checkLocalOrder(dir, st, man, m.Index); err != nil {
		return nil, err
	}
	return &localSnapshot{meta: m, state: st, man: man, dir: dir}, nil
}

// reinstall puts the snapshot's segments back into log, for a log that lost
// them (a crash during an earlier Install empties it).
func (ls *localSnapshot) reinstall(log *segment.Log, nodeDir string) error {
	if ls.meta.Kind == kindLocal {
		return log.Install(filepath.Join(ls.dir, dataDir), ls.man)
	}
	path := filepath.Join(ls.dir, archiveFile)
	f, err := log.FS().Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	defer f.Close()
	_, err = restoreArchive(bufio.NewReader(f), log, nodeDir)
	if errors.Is(err, ErrSnapshotCorrupt) || errors.Is(err, segment.ErrCorrupt) {
		return corruptFile(path, "%v", err)
	}
	return err
}

// ErrCorruptState marks FSM state bytes (in a snapshot) that do not decode:
// fsm.ErrCorruptState, named here for the node's callers.
var ErrCorruptState = fsm.ErrCorruptState
