package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// DefaultReloadInterval is how often, at most, a handshake checks whether
// the certificate, key or CA files changed (one stat per file).
const DefaultReloadInterval = time.Second

// Files names the PEM files of one role (a server, a client, a Raft peer).
type Files struct {
	// CAFile holds the CA certificates that verify the other side.
	CAFile string
	// CertFile and KeyFile are this side's certificate (chain) and key; both
	// or neither.
	CertFile, KeyFile string
}

func (f Files) validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return errors.New("tls: certificate and key files go together")
	}
	return nil
}

// material is one consistent load of a Files set.
type material struct {
	cert *tls.Certificate // nil without CertFile
	pool *x509.CertPool   // nil without CAFile
}

// stamp identifies a file's content cheaply: a rename or a rewrite changes it.
type stamp struct {
	mod  time.Time
	size int64
}

// ReloadOptions tune how files are watched; the zero value is fine.
type ReloadOptions struct {
	// Interval: zero means DefaultReloadInterval; negative checks on every
	// use.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives reload events; nil means slog.Default().
	Log *slog.Logger
}

// watched is a value loaded from files and loaded again when a file's
// modification time or size changes. It has no goroutine: the check
// happens when the value is used (in a handshake, an RPC), at most once per
// interval. A load that fails (a key that does not match its certificate
// while files are half rotated, a missing file, a syntax error) keeps the
// previous value, logs once per change, and is retried at the next check.
type watched[T any] struct {
	what     string
	paths    []string
	load     func() (T, error)
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu struct {
		sync.Mutex
		cur     T
		stamps  []stamp
		checked time.Time
		failed  []stamp // stamps of the last failed load, logged once
	}
}

// newWatched loads once and fails on any error, so a misconfigured server
// refuses to start instead of failing its first call.
func newWatched[T any](what string, paths []string, load func() (T, error), opts ReloadOptions) (*watched[T], error) {
	w := &watched[T]{what: what, paths: paths, load: load, interval: opts.Interval, now: opts.Now, log: opts.Log}
	if w.interval == 0 {
		w.interval = DefaultReloadInterval
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	st := w.stat()
	v, err := load()
	if err != nil {
		return nil, err
	}
	w.mu.cur, w.mu.stamps, w.mu.checked = v, st, w.now()
	return w, nil
}

func (w *watched[T]) stat() []stamp {
	st := make([]stamp, len(w.paths))
	for i, p := range w.paths {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			st[i] = stamp{fi.ModTime(), fi.Size()}
		}
	}
	return st
}

// get returns the value, loading it again first if a file changed (checked
// at most once per interval).
func (w *watched[T]) get() T { return w.check(false) }

// fresh is get without the interval: the files are checked now (the open
// streams' recheck, revoke.go, which runs once per interval itself).
func (w *watched[T]) fresh() T { return w.check(true) }

func (w *watched[T]) check(always bool) T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if !always && w.interval > 0 && now.Sub(w.mu.checked) < w.interval {
		return w.mu.cur
	}
	w.mu.checked = now
	st := w.stat()
	if slices.Equal(st, w.mu.stamps) {
		return w.mu.cur
	}
	// A load is a few small file reads and a parse, rare (only after a
	// change), and must be atomic with the stamps: it runs under the lock.
	v, err := w.load()
	if err != nil {
		if !slices.Equal(st, w.mu.failed) {
			w.mu.failed = st
			w.log.Warn("reloading failed; keeping the previous version", "what", w.what, "err", err)
		}
		return w.mu.cur
	}
	w.mu.cur, w.mu.stamps = v, st
	w.log.Info("reloaded", "what", w.what, "files", w.paths)
	return v
}

// watchFile is a watched value parsed from one file.
func watchFile[T any](what, path string, parse func([]byte) (T, error), opts ReloadOptions) (*watched[T], error) {
	if path == "" {
		return nil, fmt.Errorf("%s: no file", what)
	}
	return newWatched(what, []string{path}, func() (T, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			var zero T
			return zero, fmt.Errorf("%s: %w", what, err)
		}
		return parse(data)
	}, opts)
}

// Reloader serves the current certificate and CA pool of a Files set,
// re-read when the files change (see watched).
type Reloader struct {
	w *watched[*material]
}

// NewReloader loads files once and fails on any error.
func NewReloader(files Files, opts ReloadOptions) (*Reloader, error) {
	if err := files.validate(); err != nil {
		return nil, err
	}
	w, err := newWatched("tls certificates", []string{files.CAFile, files.CertFile, files.KeyFile},
		func() (*material, error) { return load(files) }, opts)
	if err != nil {
		return nil, err
	}
	return &Reloader{w: w}, nil
}

func (r *Reloader) current() *material { return r.w.get() }

// Certificate is this side's current certificate, or nil without one.
func (r *Reloader) Certificate() *tls.Certificate { return r.current().cert }

// Pool is the current CA pool, or nil without a CA file.
func (r *Reloader) Pool() *x509.CertPool { return r.current().pool }

func load(f Files) (*material, error) {
	m := &material{}
	if f.CertFile != "" {
		c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load %s / %s: %w", f.CertFile, f.KeyFile, err)
		}
		m.cert = &c
	}
	if f.CAFile != "" {
		pemBytes, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load CA: %w", err)
		}
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", f.CAFile)
		}
	}
	return m, nil
}
