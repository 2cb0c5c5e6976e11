package vfs

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory filesystem that remembers what is durable.
//
// A file's data is durable up to its last Sync; the writes and truncations
// after it are kept in order as pending operations. A directory's names are
// durable up to its last Sync (of a File opened on the directory); the
// creations, links, renames and removals after it are pending operations,
// in order, one list per directory. CrashClone returns what a power loss
// could leave: for each file, its durable data plus a random prefix of its
// pending operations (the last one kept possibly torn: a prefix of its
// bytes); for each directory, its durable names plus a random prefix of its
// pending operations. A rename is one operation (atomic). A file no name
// reaches is gone.
//
// Directories are made by MkdirAll and are durable at once (a
// simplification: the storage code creates its directories once, before
// anything else). ReadDir lists files only. Safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	dirs map[string]*memDir
}

var _ FS = (*MemFS)(nil)

// NewCrashableMem returns an empty MemFS.
func NewCrashableMem() *MemFS { return &MemFS{dirs: map[string]*memDir{}} }

type memDir struct {
	names   map[string]*inode
	durable map[string]*inode
	pending []dirOp
}

// dirOp is a change to a directory's names: name now refers to ino (nil:
// removed); a rename also removes from.
type dirOp struct {
	name, from string
	ino        *inode
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
	if op.ino == nil {
		delete(d.names, op.name)
	} else {
		d.names[op.name] = op.ino
	}
}

// CrashClone returns the filesystem a power loss could leave behind, drawn
// from rng (the same rng state gives the same result). m itself is not
// changed and may go on being used (by the "dead" process) without
// affecting the clone.
func (m *MemFS) CrashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewCrashableMem()
	crashed := map[*inode]*inode{}
	crash := func(ino *inode) *inode {
		if c, ok := crashed[ino]; ok {
			return c
		}
		c := &inode{data: slices.Clone(ino.synced)}
		k := rng.IntN(len(ino.pending) + 1)
		for _, op := range ino.pending[:k] {
			c.apply(op)
		}
		if k < len(ino.pending) && !ino.pending[k].truncate && rng.IntN(2) == 0 {
			op := ino.pending[k]
			op.data = op.data[:rng.IntN(len(op.data)+1)]
			c.apply(op)
		}
		c.synced = slices.Clone(c.data)
		crashed[ino] = c
		return c
	}
	paths := make([]string, 0, len(m.dirs))
	for p := range m.dirs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		d := m.dirs[p]
		tmp := &memDir{names: map[string]*inode{}}
		for name, ino := range d.durable {
			tmp.names[name] = ino
		}
		for _, op := range d.pending[:rng.IntN(len(d.pending)+1)] {
			tmp.apply(op)
		}
		nd := &memDir{names: map[string]*inode{}, durable: map[string]*inode{}}
		for _, name := range sortedNames(tmp.names) {
			c := crash(tmp.names[name])
			nd.names[name], nd.durable[name] = c, c
		}
		out.dirs[p] = nd
	}
	return out
}

func sortedNames(m map[string]*inode) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookupLocked splits name into its directory and base and returns the
// directory.
func (m *MemFS) lookupLocked(op, name string) (*memDir, string, error) {
	name = filepath.Clean(name)
	d := m.dirs[filepath.Dir(name)]
	if d == nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return d, filepath.Base(name), nil
}

func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dirs[filepath.Clean(name)]; ok {
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
		}
		return &memFile{fs: m, name: filepath.Clean(name), dir: true}, nil
	}
	d, base, err := m.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	ino := d.names[base]
	switch {
	case ino != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ino == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case ino == nil:
		ino = &inode{}
		op := dirOp{name: base, ino: ino}
		d.apply(op)
		d.pending = append(d.pending, op)
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

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("remove", name)
	if err != nil {
		return err
	}
	if d.names[base] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	op := dirOp{name: base}
	d.apply(op)
	d.pending = append(d.pending, op)
	return nil
}

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
	ino := d.names[from]
	if ino == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	op := dirOp{name: filepath.Base(newpath), from: from, ino: ino}
	d.apply(op)
	d.pending = append(d.pending, op)
	return nil
}

func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sd, from, err := m.lookupLocked("link", oldname)
	if err != nil {
		return err
	}
	ino := sd.names[from]
	if ino == nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	dd, base, err := m.lookupLocked("link", newname)
	if err != nil {
		return err
	}
	if dd.names[base] != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	op := dirOp{name: base, ino: ino}
	dd.apply(op)
	dd.pending = append(dd.pending, op)
	return nil
}

func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if m.dirs[p] == nil {
			m.dirs[p] = &memDir{names: map[string]*inode{}, durable: map[string]*inode{}}
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirs[filepath.Clean(dir)]
	if d == nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	return sortedNames(d.names), nil
}

func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dirs[filepath.Clean(name)]; ok {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	d, base, err := m.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	ino := d.names[base]
	if ino == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return m.infoLocked(base, ino), nil
}

func (m *MemFS) infoLocked(name string, ino *inode) memInfo {
	n := uint64(0)
	for _, d := range m.dirs {
		for _, other := range d.names {
			if other == ino {
				n++
			}
		}
	}
	return memInfo{name: name, size: int64(len(ino.data)), stat: memStat{nlink: n}}
}

// memFile is an open file (or directory) of a MemFS. An unlinked file stays
// readable and writable through it.
type memFile struct {
	fs       *MemFS
	name     string
	ino      *inode // nil for a directory
	dir      bool
	writable bool
	pos      int64
	closed   bool
}

func (f *memFile) errLocked(op string) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.dir:
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
	if f.dir {
		d := f.fs.dirs[f.name]
		d.durable = map[string]*inode{}
		for name, ino := range d.names {
			d.durable[name] = ino
		}
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
	if f.dir {
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

// memStat is the Sys() of a MemFS file's FileInfo.
type memStat struct{ nlink uint64 }

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
