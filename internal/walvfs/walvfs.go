// Package walvfs runs hashicorp/raft-wal on the storage code's filesystem
// seam (internal/vfs), so that a test can put a node's Raft log on the
// crashable in-memory filesystem and lose power under it.
//
// raft-wal v0.4.2 takes its segment files through an injectable
// filesystem (types.VFS, given with raftwal.WithSegmentFiler and
// segment.NewFiler) and its metadata through an injectable store
// (types.MetaStore, raftwal.WithMetaStore); its default metadata store is
// bbolt on a real file (metadb), which no VFS reaches. VFS adapts a
// vfs.FS with the durability discipline of raft-wal's own fs.FS (a new
// file is not synced at creation; its first Sync also syncs its
// directory; Delete syncs the directory); MetaStore keeps the metadata and
// the stable keys (Raft's term and vote) in two files on the vfs.FS, each
// replaced atomically (written to a temporary name, synced, renamed,
// directory synced) before CommitState or SetStable returns.
//
// The LogStore opens raft-wal through Open when logstore.Config.FS is set
// (tests that cut a node's power), and runs CheckTail (tail.go) before it
// opens raft-wal on either layout.
//
// What TestPowerLoss found (raft-wal v0.4.2): every entry of every
// StoreLogs that returned survives a power loss, and the log reopens
// dense. But when the power goes after a StoreLogs that filled the tail
// segment (its index frame, the seal, written and synced in that call) and
// before the rotation that follows it in the background committed the
// metadata (old segment sealed, new tail), Open recovers the tail as an
// unsealed segment whose file is sealed and never rotates: every later
// StoreLogs fails with ErrSealed ("segment is sealed"), at every restart.
// A SIGKILL in that window leaves the same state. In the test, with 8 KiB
// segments, 15 of 40 seeds end so; with the LogStore's 64 MiB segments the
// window is one rotation per 64 MiB of Raft log. CheckTail detects that
// state; the LogStore refuses to start on it (RecoveryProcedure).
package walvfs

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

// VFS is raft-wal's types.VFS on a vfs.FS.
type VFS struct{ FS vfs.FS }

var _ types.VFS = VFS{}

// ListDir implements types.VFS.
func (v VFS) ListDir(dir string) ([]string, error) { return v.FS.ReadDir(dir) }

// Create implements types.VFS: the file is created and sized, not synced
// (its first Sync syncs the directory too, as raft-wal's fs.FS does).
func (v VFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.FS.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		if err := f.Truncate(int64(size)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &newFile{File: f, fs: v.FS, dir: dir}, nil
}

// Delete implements types.VFS (the removal is durable when it returns).
func (v VFS) Delete(dir, name string) error {
	if err := v.FS.Remove(filepath.Join(dir, name)); err != nil {
		return err
	}
	return vfs.SyncDir(v.FS, dir)
}

// OpenReader implements types.VFS.
func (v VFS) OpenReader(dir, name string) (types.ReadableFile, error) {
	return v.FS.OpenFile(filepath.Join(dir, name), os.O_RDONLY, 0)
}

// OpenWriter implements types.VFS.
func (v VFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	return v.FS.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
}

// newFile is a created file whose first Sync also syncs its directory.
type newFile struct {
	vfs.File
	fs     vfs.FS
	dir    string
	synced atomic.Bool
}

func (f *newFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	if !f.synced.Swap(true) {
		return vfs.SyncDir(f.fs, f.dir)
	}
	return nil
}

// The MetaStore's files in the WAL directory.
const (
	StateFile  = "wal-meta.json"
	StableFile = "wal-stable.json"
)

// MetaStore is raft-wal's types.MetaStore on a vfs.FS (see the package
// doc). The zero value is not usable; call NewMetaStore.
type MetaStore struct {
	fs vfs.FS
	mu struct {
		sync.Mutex
		dir    string
		stable map[string][]byte
	}
}

var _ types.MetaStore = (*MetaStore)(nil)

// NewMetaStore returns a MetaStore on fsys.
func NewMetaStore(fsys vfs.FS) *MetaStore { return &MetaStore{fs: fsys} }

// Load implements types.MetaStore: the state and stable keys in dir, empty
// when there are none yet.
func (m *MetaStore) Load(dir string) (types.PersistentState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.dir != "" && m.mu.dir != dir {
		return types.PersistentState{}, fmt.Errorf("walvfs: metadata open in %s, asked for %s", m.mu.dir, dir)
	}
	var st types.PersistentState
	if err := m.read(filepath.Join(dir, StateFile), &st); err != nil {
		return st, err
	}
	stable := map[string][]byte{}
	if err := m.read(filepath.Join(dir, StableFile), &stable); err != nil {
		return st, err
	}
	m.mu.dir, m.mu.stable = dir, stable
	return st, nil
}

// read decodes the JSON file name into v; a missing file leaves v as is.
func (m *MetaStore) read(name string, v any) error {
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
func (m *MetaStore) replace(name string, v any) error {
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

func (m *MetaStore) dir() (string, error) {
	if m.mu.dir == "" {
		return "", errors.New("walvfs: metadata not loaded")
	}
	return m.mu.dir, nil
}

// CommitState implements types.MetaStore.
func (m *MetaStore) CommitState(st types.PersistentState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, err := m.dir()
	if err != nil {
		return err
	}
	return m.replace(filepath.Join(dir, StateFile), st)
}

// GetStable implements types.MetaStore.
func (m *MetaStore) GetStable(key []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.mu.stable[string(key)]
	if !ok {
		return nil, nil
	}
	return append([]byte(nil), v...), nil
}

// SetStable implements types.MetaStore.
func (m *MetaStore) SetStable(key, value []byte) error {
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
	if err := m.replace(filepath.Join(dir, StableFile), next); err != nil {
		return err
	}
	m.mu.stable = next
	return nil
}

// Close implements types.MetaStore.
func (m *MetaStore) Close() error { return nil }
