package e2e

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var binaryRace = flag.Bool("binary-race", false, "build the logplayer binary with -race (processes test only; children's logs are checked for data races)")

// builtBinary is a logplayer binary, built once per test binary run.
type builtBinary struct {
	tags string // go build -tags (empty: none)
	pkg  string // the main package to build (empty: ../cmd/logplayer)
	once sync.Once
	dir  string
	path string
	err  error
}

// build is the binary the tests run; nemesisBuild has the nemesis tag's
// test hooks compiled in (cmd/logplayer/testclock_nemesis.go), for the
// nemesis test only.
var (
	build        = &builtBinary{}
	nemesisBuild = &builtBinary{tags: "nemesis"}
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range []*builtBinary{build, nemesisBuild, fakeS3Build} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
	os.Exit(code)
}

// buildTimeout bounds `go build` of the binary: a cold build cache on a
// shared 2-core machine takes minutes.
const buildTimeout = 5 * time.Minute

// binary builds ./cmd/logplayer once, static (CGO_ENABLED=0, so the docker
// test can put it in a FROM-scratch image) and without -race: it is the
// product under test, not the test. With -binary-race it is built with the
// race detector instead (dynamically linked, for processes only).
func binary(t testing.TB) string { return build.get(t) }

func (b *builtBinary) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "logplayer-e2e-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "logplayer")
		args, cgo := []string{"build", "-trimpath", "-o", b.path}, "CGO_ENABLED=0"
		if b.tags != "" {
			args = append(args, "-tags", b.tags)
		}
		if *binaryRace {
			args, cgo = append(args, "-race"), "CGO_ENABLED=1"
		}
		cmd := exec.Command("go", append(args, cmp.Or(b.pkg, "../cmd/logplayer"))...)
		cmd.Env = append(os.Environ(), cgo)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.err = err
			return
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.err = fmt.Errorf("go build: %v\n%s", err, out.String())
			}
		case <-time.After(buildTimeout):
			_ = cmd.Process.Kill()
			<-done
			b.err = fmt.Errorf("go build did not finish within %v", buildTimeout)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// freeAddr returns a 127.0.0.1 address with a port nobody listens on,
// below the kernel's ephemeral range (ephemeralLow), so that a process
// restarted later gets the same address again (Raft peers and the
// LogPlayer's target list keep it): a port in the ephemeral range may be
// taken meanwhile as the source port of any outgoing connection (the
// nemesis's proxies open thousands), which made a restarted store node
// exit on "address already in use" in a soak.
func freeAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralLow()
	for range freeAddrTries {
		port := freePortMin + rand.IntN(lo-freePortMin)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: draw another
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatalf("no free port in [%d, %d) after %d tries", freePortMin, lo, freeAddrTries)
	return ""
}

// freeAddr draws ports from [freePortMin, ephemeralLow()).
const (
	freePortMin   = 10000
	freeAddrTries = 100
)

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range), 32768 when it cannot be read.
func ephemeralLow() int {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > freePortMin+1000 {
				lo = n
			}
		}
	}
	return lo
}

// proc is one child process of a role (a store node, the player, a shard),
// started again with the same arguments after a kill. Its stdout and stderr
// go to one log file (appended across restarts, each start marked), whose
// tail is printed when the test fails.
type proc struct {
	t    testing.TB
	name string
	args []string
	log  string
	// bin is the binary it runs (nil: build); env is added to the
	// test's environment.
	bin *builtBinary
	env []string
	// wrap, when set, is a command the binary runs under (its arguments
	// first): `ip netns exec NAME`, which execs the binary in place, so the
	// process's pid stays the one signalled.
	wrap []string

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		done   chan struct{} // closed when cmd has been reaped
		starts int
	}
}

// procStopMax bounds the wait for a killed or terminated process to exit.
const procStopMax = 30 * time.Second

// logTailLines is how much of each process's log a failing test prints.
const logTailLines = 60

func newProc(t testing.TB, dir, name string, args ...string) *proc {
	p := &proc{t: t, name: name, args: args, log: filepath.Join(dir, name+".log")}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- last %d lines of %s (%s):\n%s", logTailLines, name, p.log, tail(p.log, logTailLines))
		}
	})
	return p
}

// start runs the process (it must not be running).
func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cmd != nil {
		p.t.Fatalf("%s: start while running", p.name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.starts++
	fmt.Fprintf(f, "=== e2e: start %d of %s at %s: %s\n", p.mu.starts, p.name, time.Now().Format(time.TimeOnly+".000"), strings.Join(p.args, " "))
	bin := p.bin
	if bin == nil {
		bin = build
	}
	cmd := exec.Command(bin.get(p.t), p.args...)
	if len(p.wrap) > 0 {
		cmd = exec.Command(p.wrap[0], append(append(slices.Clone(p.wrap[1:]), bin.get(p.t)), p.args...)...)
	}
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("%s: %v", p.name, err)
	}
	done := make(chan struct{})
	p.mu.cmd, p.mu.done = cmd, done
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "=== e2e: %s exited: %v\n", p.name, err)
		f.Close()
		close(done)
	}()
}

// kill sends SIGKILL (no-op when not running) and waits for the exit.
func (p *proc) kill() { p.stop(syscall.SIGKILL) }

// terminate sends SIGTERM (graceful shutdown) and waits for the exit.
func (p *proc) terminate() { p.stop(syscall.SIGTERM) }

func (p *proc) stop(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.mu.cmd, p.mu.done
	p.mu.cmd, p.mu.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process would not handle SIGTERM
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Errorf("%s: signal %v: %v", p.name, sig, err)
	}
	select {
	case <-done:
	case <-time.After(procStopMax):
		_ = cmd.Process.Kill()
		<-done
		p.t.Errorf("%s did not exit within %v of %v", p.name, procStopMax, sig)
	}
}

// signal sends sig to the running process (SIGSTOP, SIGCONT) without
// waiting for anything.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cmd == nil {
		p.t.Fatalf("%s: signal %v while not running", p.name, sig)
	}
	if err := p.mu.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// exited reports whether the process was started and has exited by itself.
func (p *proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.done == nil {
		return false
	}
	select {
	case <-p.mu.done:
		return true
	default:
		return false
	}
}

// raceReport is how the race detector starts a report.
const raceReport = "WARNING: DATA RACE"

// checkLog fails t if the process's log shows a data race (with
// -binary-race) or a panic, quoting the first one.
func (p *proc) checkLog() {
	p.t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		p.t.Error(err)
		return
	}
	for _, marker := range []string{raceReport, "panic: "} {
		if i := bytes.Index(b, []byte(marker)); i >= 0 {
			end := min(len(b), i+4000)
			p.t.Errorf("%s's log shows %q:\n%s", p.name, marker, b[i:end])
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
