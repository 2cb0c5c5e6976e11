package logstore

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// Snapshots (DESIGN.md §4): a snapshot is a directory, not a blob.
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
const (
	metaFile     = "meta.json"
	stateFile    = "state.bin"
	manifestFile = "manifest.json"
	dataDir      = "data"
	archiveFile  = "archive.bin"
	tmpSuffix    = ".tmp"
	kindLocal    = "local"
	kindArchive  = "archive"
	restoreStage = "restore.tmp"
	exportStage  = "export.tmp"
)

// ErrSnapshot wraps snapshot store errors.
var ErrSnapshot = errors.New("logstore: snapshot")

// snapMeta is meta.json.
type snapMeta struct {
	raft.SnapshotMeta
	Kind string `json:"kind"`
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

	mu struct {
		sync.Mutex
		pins map[string]int      // snapshot id -> open readers
		busy map[string]struct{} // ids being removed or trimmed: Open refuses them
	}
}

var _ raft.SnapshotStore = (*snapshotStore)(nil)

func newSnapshotStore(dir string, fsys vfs.FS, retain int, log *slog.Logger, now func() time.Time) (*snapshotStore, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	names, err := fsys.Subdirs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	for _, name := range names { // leftovers of a crash mid-snapshot
		if strings.HasSuffix(name, tmpSuffix) {
			if err := fsys.RemoveAll(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
			}
		}
	}
	s := &snapshotStore{dir: dir, fs: fsys, retain: retain, log: log, now: now}
	s.mu.pins, s.mu.busy = map[string]int{}, map[string]struct{}{}
	return s, nil
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
	if err := s.fs.MkdirAll(path, 0o755); err != nil {
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
		if strings.HasSuffix(name, tmpSuffix) || name == restoreStage || name == exportStage {
			continue
		}
		m, err := s.readMeta(name)
		if err != nil {
			s.log.Warn("skipping unreadable snapshot", "snapshot", name, "err", err)
			continue
		}
		metas = append(metas, m)
	}
	slices.SortFunc(metas, func(a, b snapMeta) int { // newest first, as raft expects
		return -cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.Index, b.Index), cmp.Compare(a.ID, b.ID))
	})
	return metas, nil
}

func (s *snapshotStore) readMeta(id string) (snapMeta, error) {
	var m snapMeta
	b, err := vfs.ReadFile(s.fs, filepath.Join(s.dir, id, metaFile))
	if err != nil {
		return m, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.ID != id || (m.Kind != kindLocal && m.Kind != kindArchive) {
		return m, fmt.Errorf("%w: %s: bad meta.json (%v)", ErrSnapshot, id, err)
	}
	return m, nil
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
	if m.Kind == kindArchive {
		f, err := s.fs.Open(filepath.Join(dir, archiveFile))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		return &m.SnapshotMeta, f, nil
	}
	state, err := vfs.ReadFile(s.fs, filepath.Join(dir, stateFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	mjson, err := vfs.ReadFile(s.fs, filepath.Join(dir, manifestFile))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	var man segment.Manifest
	if err := json.Unmarshal(mjson, &man); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: manifest: %w", ErrSnapshot, id, err)
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

// reap removes all but the newest retain snapshots, except those pinned
// by an open reader (their last Close reaps them).
func (s *snapshotStore) reap() {
	metas, err := s.list()
	if err != nil {
		s.log.Warn("listing snapshots to reap", "err", err)
		return
	}
	for _, m := range metas[min(len(metas), s.retain):] {
		if !s.lock(m.ID) {
			continue // pinned: its last reader's Close reaps it
		}
		if err := s.fs.RemoveAll(filepath.Join(s.dir, m.ID)); err != nil { // outside s.mu: Open of another id never waits on this I/O
			s.log.Warn("reaping snapshot", "snapshot", m.ID, "err", err)
		}
		s.unlock(m.ID)
	}
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

// readArchiveHeader reads the state and manifest that start an archive.
func readArchiveHeader(r io.Reader) (*fsm.State, segment.Manifest, error) {
	var man segment.Manifest
	st, mb, err := fsm.ReadArchiveHeader(r)
	if err != nil {
		return nil, man, fmt.Errorf("%w: archive: %w", ErrSnapshot, err)
	}
	if err := json.Unmarshal(mb, &man); err != nil {
		return nil, man, fmt.Errorf("%w: archive manifest: %w", ErrSnapshot, err)
	}
	return st, man, nil
}

// restoreArchive reads an archive stream, installs its segments into log
// (through a staging directory under nodeDir, on the log's filesystem) and
// returns its state.
func restoreArchive(r io.Reader, log *segment.Log, nodeDir string) (*fsm.State, error) {
	st, man, err := readArchiveHeader(r)
	if err != nil {
		return nil, err
	}
	if man.LastLSN != st.LastLSN() {
		return nil, fmt.Errorf("%w: archive manifest ends at lsn %d, state at %d", ErrSnapshot, man.LastLSN, st.LastLSN())
	}
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
	mjson, err := json.Marshal(m)
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
			fsys.RemoveAll(k.path)
			return fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
	}
	if k.meta.Kind == "" {
		fsys.RemoveAll(k.path)
		return fmt.Errorf("%w: closing an empty snapshot", ErrSnapshot)
	}
	mb, err := json.Marshal(k.meta)
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
		fsys.RemoveAll(k.path)
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	k.store.reap()
	return nil
}

// Cancel discards the snapshot.
func (k *snapSink) Cancel() error {
	k.closed = true
	if k.archive != nil {
		k.archive.Close()
	}
	return k.store.fs.RemoveAll(k.path)
}

func writeFileSync(fsys vfs.FS, path string, b []byte) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = failpoint.Inject(failpoint.SnapshotSync)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	return nil
}

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
	mjson, err := json.Marshal(m)
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
	var st *fsm.State
	var man segment.Manifest
	if m.Kind == kindArchive {
		f, err := s.fs.Open(filepath.Join(dir, archiveFile))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		st, man, err = readArchiveHeader(bufio.NewReader(f))
		f.Close()
		if err != nil {
			return nil, err
		}
	} else {
		b, err := vfs.ReadFile(s.fs, filepath.Join(dir, stateFile))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		if st, err = fsm.UnmarshalState(b); err != nil {
			return nil, fmt.Errorf("%s: %w", m.ID, err)
		}
		mb, err := vfs.ReadFile(s.fs, filepath.Join(dir, manifestFile))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
		}
		if err := json.Unmarshal(mb, &man); err != nil {
			return nil, fmt.Errorf("%w: %s manifest: %w", ErrSnapshot, m.ID, err)
		}
	}
	return &localSnapshot{meta: m, state: st, man: man, dir: dir}, nil
}

// reinstall puts the snapshot's segments back into log, for a log that lost
// them (a crash during an earlier Install empties it).
func (ls *localSnapshot) reinstall(log *segment.Log, nodeDir string) error {
	if ls.meta.Kind == kindLocal {
		return log.Install(filepath.Join(ls.dir, dataDir), ls.man)
	}
	f, err := log.FS().Open(filepath.Join(ls.dir, archiveFile))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	defer f.Close()
	_, err = restoreArchive(bufio.NewReader(f), log, nodeDir)
	return err
}

// ErrCorruptState marks FSM state bytes (in a snapshot) that do not decode:
// fsm.ErrCorruptState, named here for the node's callers.
var ErrCorruptState = fsm.ErrCorruptState
