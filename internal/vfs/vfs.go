// Package vfs is the filesystem seam of the storage code: a small FS
// interface that the segment log (and its tests) take instead of calling os
// directly, the real filesystem (Default), and a crashable in-memory
// filesystem (NewCrashableMem) whose CrashClone models a power loss: every
// write, creation, rename and removal not yet made durable by an fsync of
// the file (data) or of its directory (names) may be lost, and any prefix of
// them may survive. Pebble's vfs is the model; this is a much smaller one
// that holds what the segment log and the snapshot store use.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// FS is the part of a filesystem the storage code uses. Paths are OS paths.
type FS interface {
	// OpenFile opens a file as os.OpenFile does (O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC; no O_APPEND).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Open opens a file or a directory read-only; a directory's File is
	// only good for Sync (making the names in it durable) and Close.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it (nil if name does
	// not exist), as os.RemoveAll does.
	RemoveAll(name string) error
	// Rename renames a file or a directory within its directory.
	Rename(oldpath, newpath string) error
	// Link makes newname another name of the file oldname.
	Link(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the names of the files in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Subdirs returns the names of the directories in dir, sorted.
	Subdirs(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
}

// File is an open file. *os.File is one.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Stat() (os.FileInfo, error)
	// Sync makes the file's data (or, for a directory, its names) durable.
	Sync() error
	Truncate(size int64) error
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

var _ FS = osFS{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldpath, newpath string) error        { return os.Rename(oldpath, newpath) }
func (osFS) Link(oldname, newname string) error          { return os.Link(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) ReadDir(dir string) ([]string, error) { return osList(dir, false) }
func (osFS) Subdirs(dir string) ([]string, error) { return osList(dir, true) }

// osList returns the sorted names in dir of the files (dirs false) or of
// the directories (dirs true).
func osList(dir string, dirs bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() == dirs {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir fsyncs the directory dir, making the creations, renames and
// removals of names in it durable.
func SyncDir(fs FS, dir string) error {
	d, err := fs.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// WriteFileSync creates or truncates the file name, writes data into it
// and fsyncs it, then closes it; beforeSync, when not nil, runs between the
// write and the fsync (a fault-injection point) and its error stops there.
// It returns the first error; the file is closed in every case (a file it
// could not finish is left as it is: the caller removes or replaces it).
// The name is durable only once its directory is synced (SyncDir).
func WriteFileSync(fs FS, name string, data []byte, beforeSync func() error) error {
	f, err := fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && beforeSync != nil {
		err = beforeSync()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// MkdirAllSync makes dir and any missing parent, as MkdirAll does, and
// makes its path durable: it fsyncs every directory above dir, from the
// top down (for a relative dir, up to the working directory). A new
// directory's name, like a file's, is durable only once its parent is
// synced; without that a power loss can drop the directory and everything
// synced below it. Every ancestor, not only those it creates: one that
// exists may have been made by a run that crashed before its sync. An
// ancestor this process may not open (a home directory of mode 0711) is
// skipped when the directory below it existed already: it cannot be
// synced from here, and refusing to start for it would help no one; when
// the call made a directory in it, that is an error. It is for directories made
// once (at start, one per checkpoint), so the few fsyncs do not matter.
func MkdirAllSync(fs FS, dir string, perm os.FileMode) error {
	// path[0] is dir, path[i+1] the parent of path[i].
	path := []string{filepath.Clean(dir)}
	for d := path[0]; filepath.Dir(d) != d; d = filepath.Dir(d) {
		path = append(path, filepath.Dir(d))
	}
	existed := make([]bool, len(path))
	for i, p := range path {
		_, err := fs.Stat(p)
		existed[i] = err == nil
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(path) - 1; i >= 1; i-- {
		err := SyncDir(fs, path[i])
		// Skipped only when nothing this call made is in it.
		if err != nil && !(existed[i-1] && errors.Is(err, os.ErrPermission)) {
			return err
		}
	}
	return nil
}

// ReadFile returns the whole content of the file name.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// LinkCount returns how many names the file described by fi has (1 when the
// filesystem does not say).
func LinkCount(fi os.FileInfo) uint64 {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return uint64(st.Nlink)
	case memStat:
		return st.nlink
	}
	return 1
}

// SameFile reports whether a and b (from Stat of the same FS) describe
// the same file: two names of one file (hard links) are the same file.
func SameFile(a, b os.FileInfo) bool {
	ma, okA := a.Sys().(memStat)
	mb, okB := b.Sys().(memStat)
	if okA || okB {
		return okA && okB && ma.ino == mb.ino
	}
	return os.SameFile(a, b)
}

// IsCrossDevice reports a hard link or rename refused because the two
// paths are on different devices.
func IsCrossDevice(err error) bool { return errors.Is(err, syscall.EXDEV) }
