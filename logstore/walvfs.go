// The raft-wal adapter: hashicorp/raft-wal on the storage code's
// filesystem seam (internal/vfs), so that a test can put a node's Raft log
// on the crashable in-memory filesystem and lose power under it.
//
// raft-wal v0.4.2 takes its segment files through an injectable
// filesystem (types.VFS, given with raftwal.WithSegmentFiler and
// segment.NewFiler) and its metadata through an injectable store
// (types.MetaStore, raftwal.WithMetaStore); its default metadata store is
// bbolt on a real file (metadb), which no VFS reaches. walVFS adapts a
// vfs.FS with the durability discipline of raft-wal's own fs.FS (a new
// file is not synced at creation; its first Sync also syncs its
// directory; Delete syncs the directory); walMetaStore keeps the metadata
// and the stable keys (Raft's term and vote) in two files on the vfs.FS,
// each replaced atomically (written to a temporary name, synced, renamed,
// directory synced) before CommitState or SetStable returns.
//
// openRaftStore (raftstore.go) opens raft-wal through openWALOnFS when
// Config.FS is set (tests that cut a node's power), and runs checkWALTail
// (walvfs_tail.go) before it opens raft-wal on either layout.
//
// What TestWALPowerLoss found (raft-wal v0.4.2): every entry of every
// StoreLogs that returned survives a power loss, and the log reopens
// dense. But when the power goes after a StoreLogs that filled the tail
// segment (its index frame, the seal, written and synced in that call) and
// before the rotation that follows it in the background committed the
// metadata (old segment sealed, new tail), Open recovers the tail as an
// unsealed segment whose file is sealed and never rotates: every later
// StoreLogs fails with ErrSealed ("segment is sealed"), at every restart.
// A SIGKILL in that window leaves the same state. In the test, with 8 KiB
// segments, 15 of 40 seeds end so; with the LogStore's 64 MiB segments the
// window is one rotation per 64 MiB of Raft log. checkWALTail detects that
// state; the LogStore refuses to start on it (sealedTailRecovery).

package logstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft-wal/types"

	"github.com/logplayer/logplayer/internal/vfs"
)

// walVFS is raft-wal's types.VFS on a vfs.FS.
type walVFS struct{ fs vfs.FS }

var _ types.VFS = walVFS{}

// ListDir implements types.VFS.
func (v walVFS) ListDir(dir string) ([]string, error) { return v.fs.ReadDir(dir) }

// Create implements types.VFS: the file is created and sized, not synced
// (its first Sync syncs the directory too, as raft-wal's fs.FS does).
func (v walVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.fs.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		if err := f.Truncate(int64(size)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &walNewFile{File: f, fs: v.fs, dir: dir}, nil
}

// Delete implements types.VFS (the removal is durable when it returns).
func (v walVFS) Delete(dir, name string) error {
	if err := v.fs.Remove(filepath.Join(dir, name)); err != nil {
		return err
	}
	return vfs.SyncDir(v.fs, dir)
}

// OpenReader implements types.VFS.
func (v walVFS) OpenReader(dir, name string) (types.ReadableFile, error) {
	return v.fs.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
}

// OpenWriter implements types.VFS.
func (v walVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	return v.fs.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
}

// walNewFile is a created file whose first Sync also syncs its directory.
type walNewFile struct {
	vfs.File
	fs     vfs.FS
	dir    string
	synced atomic.Bool
}

func (f *walNewFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	if !f.synced.Swap(true) {
		return vfs.SyncDir(f.fs, f.dir)
	}
	return nil
}

// The walMetaStore's files in the WAL directory.
const (
	walStateFile  = "wal-meta.json"
	walStableFile = "wal-stable.json"
)

// walMetaStore is raft-wal's types.MetaStore on a vfs.FS (see the top of
// this file). The zero value is not usable; call newWALMetaStore.
type walMetaStore struct {
	fs vfs.FS
	mu struct {
		sync.Mutex
		dir    string
		stable map[string][]byte
	}
}

var _ types.MetaStore = (*walMetaStore)(nil)

// newWALMetaStore returns a walMetaStore on fsys.
func newWALMetaStore(fsys vfs.FS) *walMetaStore { return &walMetaStore{fs: fsys} }

// Load implements types.MetaStore: the state and stable keys in dir, empty
// when there are none yet.
func (m *walMetaStore) Load(dir string) (types.PersistentState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.dir != "" && m.mu.dir != dir {
		return types.PersistentState{}, fmt.Errorf("walvfs: metadata open in %s, asked for %s", m.mu.dir, dir)
	}
	var st types.PersistentState
	if err := m.read(filepath.Join(dir, walStateFile), &st); err != nil {
		return st, err
	}
	stable := map[string][]byte{}
	if err := m.read(filepath.Join(dir, walStableFile), &stable); err != nil {
		return st, err
	}
	m.mu.dir, m.mu.stable = dir, stable
	return st, nil
}

// read decodes the JSON file name into v; a missing file leaves v as is.
func (m *walMetaStore) read(name string, v any) error {
	b, err := vfs.ReadFile(m.fs, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("walvfs: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("walvfs: %s: %w", name, err)
	}
	return nil
}

// replace makes v the content of name, durably and atomically.
func (m *walMetaStore) replace(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	f, err := m.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("walvfs: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = m.fs.Rename(tmp, name)
	}
	if err == nil {
		err = vfs.SyncDir(m.fs, filepath.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("walvfs: replace %s: %w", name, err)
	}
	return nil
}

func (m *walMetaStore) dir() (string, error) {
	if m.mu.dir == "" {
		return "", errors.New("walvfs: metadata not loaded")
	}
	return m.mu.dir, nil
}

// CommitState implements types.MetaStore.
func (m *walMetaStore) CommitState(st types.PersistentState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, err := m.dir()
	if err != nil {
		return err
	}
	return m.replace(filepath.Join(dir, walStateFile), st)
}

// GetStable implements types.MetaStore.
func (m *walMetaStore) GetStable(key []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.mu.stable[string(key)]
	if !ok {
		return nil, nil
	}
	return append([]byte(nil), v...), nil
}

// SetStable implements types.MetaStore.
func (m *walMetaStore) SetStable(key, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, err := m.dir()
	if err != nil {
		return err
	}
	next := make(map[string][]byte, len(m.mu.stable)+1)
	for k, v := range m.mu.stable {
		next[k] = v
	}
	next[string(key)] = append([]byte(nil), value...)
	if err := m.replace(filepath.Join(dir, walStableFile), next); err != nil {
		return err
	}
	m.mu.stable = next
	return nil
}

// Close implements types.MetaStore.
func (m *walMetaStore) Close() error { return nil }
