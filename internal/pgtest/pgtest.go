// Package pgtest starts a throwaway PostgreSQL server for a test: initdb and
// pg_ctl from the OS packages in a fresh temporary directory, listening on a
// random loopback port, removed when the test ends. Tests of the SQL sink use
// it so that the SQL a user runs is the SQL the test runs (no mocks).
//
// initdb refuses to run as root: when the test runs as root, the directory
// is given to the `postgres` OS user (Debian's package creates it) and every
// server command runs as that user through runuser.
//
// When the server binaries cannot be found the test FAILS (it never skips):
// CI installs them (.ci/run), a developer installs the distribution's
// postgresql package.
//
// Goroutines: none; the server is a separate process tree owned by pg_ctl,
// stopped (immediate mode) in the test's cleanup.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running (or stopped) throwaway PostgreSQL cluster.
type Server struct {
	t       testing.TB
	bin     string // directory of initdb, pg_ctl, postgres
	dir     string // the temporary directory: data/, the socket, server.log
	port    int
	asUser  string // OS user running the server commands ("" = this process's)
	stopped bool
}

// installHint is how to get the binaries, part of every "not found" failure.
const installHint = "install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql; " +
	".ci/run does it on CI), or put the directory of initdb and pg_ctl on PATH"

// BinDir finds the directory of the PostgreSQL server binaries: PATH,
// `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin.
func BinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real)) // a link on PATH: its real directory
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	globbed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(globbed, func(i, j int) bool { return version(globbed[i]) > version(globbed[j]) })
	candidates = append(candidates, globbed...)
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: PostgreSQL server binaries (initdb, pg_ctl) not found in PATH, "+
		"`pg_config --bindir` or /usr/lib/postgresql/*/bin: %s", installHint)
}

// version is the major version in /usr/lib/postgresql/N/bin (0 if none).
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Start initialises and starts a server for t; it is stopped and its
// directory removed in t's cleanup. It fails t when PostgreSQL is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parents are private to this process's user, and the
	// server may run as another one.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		if !s.stopped {
			_ = s.ctl("stop", "-m", "immediate", "-w")
		}
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		if err := s.giveTo("postgres"); err != nil {
			t.Fatalf("pgtest: running as root, and initdb refuses root: %v (the postgresql package creates that user)", err)
		}
	}
	if out, err := s.run(filepath.Join(bin, "initdb"), "-D", s.dataDir(), "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.Start()
	return s
}

// giveTo makes the directory owned by the OS user name and runs the server
// commands as that user.
func (s *Server) giveTo(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return err
	}
	s.asUser = name
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// run runs a server command (as s.asUser when set) and returns its output.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	if s.asUser != "" {
		args = append([]string{"-u", s.asUser, "--", name}, args...)
		name = "runuser"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

func (s *Server) ctl(args ...string) error {
	args = append([]string{"-D", s.dataDir()}, args...)
	out, err := s.run(filepath.Join(s.bin, "pg_ctl"), args...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts the (stopped) server on its port and waits until it accepts
// connections. Start calls it once; a test calls it again after Stop.
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=50 -c shared_buffers=16MB",
		s.port, s.dir)
	if err := s.ctl("start", "-w", "-t", "300", "-l", filepath.Join(s.dir, "server.log"), "-o", opts); err != nil {
		s.t.Fatalf("pgtest: %v\nserver log:\n%s", err, s.Log())
	}
	s.stopped = false
}

// Stop stops the server: mode "immediate" is a crash (no checkpoint, the
// WAL replays at the next Start), "fast" a clean shutdown.
func (s *Server) Stop(mode string) {
	s.t.Helper()
	if err := s.ctl("stop", "-m", mode, "-w", "-t", "300"); err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
	s.stopped = true
}

// Log returns the server's log file.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// DSN is a connection string for database db (as user postgres) at addr
// (the server's own address when empty; a test proxy's otherwise).
func (s *Server) DSN(db, addr string) string {
	if addr == "" {
		addr = s.Addr()
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db)
}

// CreateDB creates database name (a plain identifier) and returns its DSN.
func (s *Server) CreateDB(name string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres", ""))
	if err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		s.t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return s.DSN(name, "")
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
