package vfs

import (
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory filesystem that remembers what is durable.
//
// A file's data is durable up to its last Sync; the writes and truncations
// after it are kept in order as pending operations. A directory's names
// (of files and of subdirectories) are durable up to its last Sync (of a
// File opened on the directory); the creations, links, renames and
// removals after it are pending operations, in order, one list per
// directory. CrashClone returns what a power loss could leave: for each
// file, its durable data plus a random prefix of its pending operations
// (the last one kept possibly torn: a prefix of its bytes); for each
// directory, its durable names plus a random prefix of its pending
// operations. A rename (of a file or a directory) is one operation
// (atomic); RemoveAll is a removal of each name below the directory, in
// its directory, then of the directory's own name. A file or directory no
// name reaches is gone.
//
// A directory MkdirAll creates is a name pending in its parent like a
// file's, durable once the parent is synced (MkdirAllSync does that): a
// crash before may drop it, and with it everything below it however well
// synced. DurableClone is the image that keeps only what was synced.
// ReadDir lists files only, Subdirs directories only. Paths are taken from one root (a relative path as if
// it began with /). Safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memDir
}

var _ FS = (*MemFS)(nil)

// NewCrashableMem returns an empty MemFS.
func NewCrashableMem() *MemFS { return &MemFS{root: newMemDir()} }

// node is what a directory entry names: an *inode or a *memDir.
type node interface{ isNode() }

func (*inode) isNode()  {}
func (*memDir) isNode() {}

type memDir struct {
	names   map[string]node
	durable map[string]node
	pending []dirOp
}

func newMemDir() *memDir {
	return &memDir{names: map[string]node{}, durable: map[string]node{}}
}

// dirOp is a change to a directory's names: name now refers to n (nil:
// removed); a rename also removes from.
type dirOp struct {
	name, from string
	n          node
}

type inode struct {
	data    []byte
	synced  []byte
	pending []fileOp
}

// fileOp is a write of data at off, or (truncate) a change of size.
type fileOp struct {
	off      int64
	data     []byte
	truncate bool
}

func (ino *inode) apply(op fileOp) {
	if op.truncate {
		ino.data = resize(ino.data, op.off)
		return
	}
	end := op.off + int64(len(op.data))
	if end > int64(len(ino.data)) {
		ino.data = resize(ino.data, end)
	}
	copy(ino.data[op.off:], op.data)
}

func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		return b[:n]
	}
	return append(b, make([]byte, n-int64(len(b)))...)
}

func (d *memDir) apply(op dirOp) {
	if op.from != "" {
		delete(d.names, op.from)
	}
	if op.n == nil {
		delete(d.names, op.name)
	} else {
		d.names[op.name] = op.n
	}
}

// change applies op now and keeps it pending until the directory's Sync.
func (d *memDir) change(op dirOp) {
	d.apply(op)
	d.pending = append(d.pending, op)
}

// CrashClone returns the filesystem a power loss could leave behind, drawn
// from rng (the same rng state gives the same result). m itself is not
// changed and may go on being used (by the "dead" process) without
// affecting the clone.
func (m *MemFS) CrashClone(rng *rand.Rand) *MemFS { return m.crashClone(rng) }

// DurableClone returns the filesystem a power loss leaves when none of the
// pending operations reached the disk: only what was fsynced (file data by
// the file's Sync, names by their directory's). It is the one image a test
// can check deterministically that everything a method promised durable is.
func (m *MemFS) DurableClone() *MemFS { return m.crashClone(nil) }

// crashClone is CrashClone; a nil rng keeps no pending operation.
func (m *MemFS) crashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := func(n int) int {
		if rng == nil {
			return 0
		}
		return rng.IntN(n + 1)
	}
	crashed := map[*inode]*inode{}
	crashFile := func(ino *inode) *inode {
		if c, ok := crashed[ino]; ok {
			return c
		}
		c := &inode{data: slices.Clone(ino.synced)}
		k := prefix(len(ino.pending))
		for _, op := range ino.pending[:k] {
			c.apply(op)
		}
		if rng != nil && k < len(ino.pending) && !ino.pending[k].truncate && rng.IntN(2) == 0 {
			op := ino.pending[k]
			op.data = op.data[:rng.IntN(len(op.data)+1)]
			c.apply(op)
		}
		c.synced = slices.Clone(c.data)
		crashed[ino] = c
		return c
	}
	var crashDir func(d *memDir) *memDir
	crashDir = func(d *memDir) *memDir {
		tmp := &memDir{names: maps.Clone(d.durable)}
		for _, op := range d.pending[:prefix(len(d.pending))] {
			tmp.apply(op)
		}
		nd := newMemDir()
		for _, name := range sortedNames(tmp.names) {
			var c node
			switch n := tmp.names[name].(type) {
			case *inode:
				c = crashFile(n)
			case *memDir:
				c = crashDir(n)
			}
			nd.names[name], nd.durable[name] = c, c
		}
		return nd
	}
	return &MemFS{root: crashDir(m.root)}
}

func sortedNames(m map[string]node) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// namesOf returns the sorted names in d of files (dirs false) or of
// directories (dirs true).
func namesOf(d *memDir, dirs bool) []string {
	var out []string
	for _, name := range sortedNames(d.names) {
		if _, isDir := d.names[name].(*memDir); isDir == dirs {
			out = append(out, name)
		}
	}
	return out
}

// components splits a cleaned path into its names below the root.
func components(name string) []string {
	name = strings.Trim(filepath.ToSlash(filepath.Clean(name)), "/")
	if name == "" || name == "." {
		return nil
	}
	return strings.Split(name, "/")
}

// dirLocked returns the directory at path, nil if there is none.
func (m *MemFS) dirLocked(path string) *memDir {
	d := m.root
	for _, c := range components(path) {
		sub, ok := d.names[c].(*memDir)
		if !ok {
			return nil
		}
		d = sub
	}
	return d
}

// lookupLocked splits name into its directory and base and returns the
// directory.
func (m *MemFS) lookupLocked(op, name string) (*memDir, string, error) {
	name = filepath.Clean(name)
	d := m.dirLocked(filepath.Dir(name))
	if d == nil || len(components(name)) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return d, filepath.Base(name), nil
}

func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.dirLocked(name); d != nil {
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
		}
		return &memFile{fs: m, name: filepath.Clean(name), dir: d}, nil
	}
	d, base, err := m.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	ino, _ := d.names[base].(*inode)
	switch {
	case ino != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ino == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case ino == nil:
		ino = &inode{}
		d.change(dirOp{name: base, n: ino})
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if writable && flag&os.O_TRUNC != 0 && len(ino.data) > 0 {
		op := fileOp{truncate: true}
		ino.apply(op)
		ino.pending = append(ino.pending, op)
	}
	return &memFile{fs: m, name: filepath.Clean(name), ino: ino, writable: writable}, nil
}

func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("remove", name)
	if err != nil {
		return err
	}
	switch n := d.names[base].(type) {
	case nil:
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	case *memDir:
		if len(n.names) > 0 {
			return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
		}
	}
	d.change(dirOp{name: base})
	return nil
}

// RemoveAll removes name and, for a directory, everything below it: each
// name is a removal pending in its directory, the deepest first, as a
// recursive unlink does. A missing name is no error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(components(name)) == 0 {
		return &fs.PathError{Op: "removeall", Path: name, Err: syscall.EINVAL}
	}
	d, base, err := m.lookupLocked("removeall", name)
	if err != nil {
		return nil
	}
	var empty func(d *memDir)
	empty = func(d *memDir) {
		for _, name := range sortedNames(d.names) {
			if sub, ok := d.names[name].(*memDir); ok {
				empty(sub)
			}
			d.change(dirOp{name: name})
		}
	}
	switch n := d.names[base].(type) {
	case nil:
		return nil
	case *memDir:
		empty(n)
	}
	d.change(dirOp{name: base})
	return nil
}

// Rename renames a file or a directory within its directory. A file
// replaces a file of the new name; a directory replaces only an empty
// directory.
func (m *MemFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if filepath.Dir(filepath.Clean(oldpath)) != filepath.Dir(filepath.Clean(newpath)) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EXDEV}
	}
	d, from, err := m.lookupLocked("rename", oldpath)
	if err != nil {
		return err
	}
	n := d.names[from]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	to := filepath.Base(newpath)
	if to == from {
		return nil
	}
	_, srcDir := n.(*memDir)
	switch dst := d.names[to].(type) {
	case *memDir:
		if !srcDir {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		}
		if len(dst.names) > 0 {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENOTEMPTY}
		}
	case *inode:
		if srcDir {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENOTDIR}
		}
	}
	d.change(dirOp{name: to, from: from, n: n})
	return nil
}

func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sd, from, err := m.lookupLocked("link", oldname)
	if err != nil {
		return err
	}
	ino, ok := sd.names[from].(*inode)
	if !ok {
		err := fs.ErrNotExist
		if sd.names[from] != nil {
			err = fs.ErrPermission // no links to directories
		}
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
	}
	dd, base, err := m.lookupLocked("link", newname)
	if err != nil {
		return err
	}
	if dd.names[base] != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	dd.change(dirOp{name: base, n: ino})
	return nil
}

func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, c := range components(dir) {
		switch n := d.names[c].(type) {
		case *memDir:
			d = n
			continue
		case *inode:
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		sub := newMemDir()
		d.change(dirOp{name: c, n: sub})
		d = sub
	}
	return nil
}

func (m *MemFS) ReadDir(dir string) ([]string, error) { return m.list("readdir", dir, false) }

// Subdirs returns the names of the directories in dir, sorted.
func (m *MemFS) Subdirs(dir string) ([]string, error) { return m.list("subdirs", dir, true) }

func (m *MemFS) list(op, dir string, dirs bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirLocked(dir)
	if d == nil {
		return nil, &fs.PathError{Op: op, Path: dir, Err: fs.ErrNotExist}
	}
	return namesOf(d, dirs), nil
}

func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirLocked(name) != nil {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	d, base, err := m.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	ino, ok := d.names[base].(*inode)
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return m.infoLocked(base, ino), nil
}

func (m *MemFS) infoLocked(name string, ino *inode) memInfo {
	n := uint64(0)
	var count func(d *memDir)
	count = func(d *memDir) {
		for _, other := range d.names {
			switch o := other.(type) {
			case *inode:
				if o == ino {
					n++
				}
			case *memDir:
				count(o)
			}
		}
	}
	count(m.root)
	return memInfo{name: name, size: int64(len(ino.data)), stat: memStat{nlink: n, ino: ino}}
}

// memFile is an open file (or directory) of a MemFS. An unlinked file stays
// readable and writable through it.
type memFile struct {
	fs       *MemFS
	name     string
	ino      *inode  // nil for a directory
	dir      *memDir // nil for a file
	writable bool
	pos      int64
	closed   bool
}

func (f *memFile) errLocked(op string) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.dir != nil:
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.errLocked("read"); err != nil {
		return 0, err
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.errLocked("write"); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	op := fileOp{off: off, data: slices.Clone(p)}
	f.ino.apply(op)
	f.ino.pending = append(f.ino.pending, op)
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.errLocked("truncate"); err != nil {
		return err
	}
	if !f.writable {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrPermission}
	}
	op := fileOp{off: size, truncate: true}
	f.ino.apply(op)
	f.ino.pending = append(f.ino.pending, op)
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "sync", Path: f.name, Err: fs.ErrClosed}
	}
	if d := f.dir; d != nil {
		d.durable = maps.Clone(d.names)
		d.pending = nil
		return nil
	}
	f.ino.synced = slices.Clone(f.ino.data)
	f.ino.pending = nil
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	if f.dir != nil {
		return memInfo{name: filepath.Base(f.name), dir: true}, nil
	}
	return f.fs.infoLocked(filepath.Base(f.name), f.ino), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

// memStat is the Sys() of a MemFS file's FileInfo: its link count and
// identity (SameFile).
type memStat struct {
	nlink uint64
	ino   *inode
}

type memInfo struct {
	name string
	size int64
	dir  bool
	stat memStat
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return i.stat }
