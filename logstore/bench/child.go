package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logplayer/logplayer/logstore"
)

// Server processes (Config.ServerCommand, issue #26): the servers of the
// systems whose server CPU the goal compares (the LogStore on each
// backend, the no-op floor) run in a child process each, so a row's
// server CPU is that process's CPU time (its utime + stime, read from
// /proc/<pid>/stat at the start and the end of the row's window): its own
// heap, its own GC, no client's garbage in it. The child is the program
// of ServerCommand started with ServerChildEnv set to its spec (JSON); the
// program's entry (RunReport, or a test's TestMain) calls ServeChild.
//
// The child talks in lines. It writes "ready JSON" (childReady) once it
// serves; then it answers each request on its stdin: "stats" with
// "stats JSON" (childStats: the leader's histograms and which node leads),
// "profile PATH" (start a CPU profile of the child into PATH) and
// "unprofile" (stop it) with "ok", a failed request with "error MESSAGE".
// The end of its stdin stops it; so does SIGTERM, which on Linux it also
// gets when the benchmark dies (Pdeathsig). Either way it closes its
// servers and removes its data directory when it made it.

// ServerChildEnv is the environment variable that makes a process a
// server child: its value is the child's spec (JSON).
const ServerChildEnv = "LOGPLAYER_BENCH_SERVER_CHILD"

// childReadyTimeout bounds a child's start (a cluster electing a leader);
// childStopMax its clean exit after its stdin closed, before it is killed;
// childAnswerMax an answer to a request.
const (
	childReadyTimeout = 90 * time.Second
	childStopMax      = 30 * time.Second
	childAnswerMax    = 30 * time.Second
)

// Tuning is the LogStore node settings a run may change (zero: the node
// default). Unlike Config.Node it crosses into a server process.
type Tuning struct {
	MaxInflightEntries int     `json:"max_inflight_entries,omitempty"`
	PipelineMinTxns    int     `json:"pipeline_min_txns,omitempty"`
	MaxAppendEntries   int     `json:"max_append_entries,omitempty"`
	HoldReturnRatio    float64 `json:"hold_return_ratio,omitempty"`
}

func (t Tuning) apply(nc *logstore.Config) {
	nc.MaxInflightEntries, nc.PipelineMinTxns, nc.MaxAppendEntries = t.MaxInflightEntries, t.PipelineMinTxns, t.MaxAppendEntries
	nc.HoldReturnRatio = t.HoldReturnRatio
}

// childRole is what a server child hosts.
type childRole string

const (
	roleLogStore childRole = "logstore" // 3 LogStore nodes on one backend
	roleFloor    childRole = "floor"    // the no-op gRPC server (floor.go)
)

// childSpec is a server child's ServerChildEnv.
type childSpec struct {
	Role    childRole             `json:"role"`
	Backend logstore.RaftLogStore `json:"backend,omitempty"`
	// Dir is where the nodes' data goes; empty: a temporary directory of
	// the child's own, removed when it exits.
	Dir    string `json:"dir,omitempty"`
	HTTP   bool   `json:"http,omitempty"` // also serve JSON over HTTP
	Tuning Tuning `json:"tuning"`
}

// childReady is a child's "ready" line.
type childReady struct {
	API  []string `json:"api"`            // gRPC addresses, one per node
	HTTP []string `json:"http,omitempty"` // HTTP addresses, parallel to API
}

// childStats is a child's answer to "stats": its cluster's batches and
// the index of the node that leads (-1: none).
type childStats struct {
	Txns, Entries         float64
	BatchReqs, BatchCalls float64
	AppendSec, Appends    float64
	CommitSec, Commits    float64
	Leader                int
}

// ServeChild serves as a server child when ServerChildEnv is set: it
// hosts the spec's servers, answers requests on in with lines on out
// until in ends, ctx is done or a SIGTERM comes, and returns served true.
// Without the variable it returns false at once.
func ServeChild(ctx context.Context, in io.Reader, out io.Writer) (served bool, err error) {
	raw, ok := os.LookupEnv(ServerChildEnv)
	if !ok {
		return false, nil
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return true, fmt.Errorf("bench server child: %s: %w", ServerChildEnv, err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	return true, serveChild(ctx, spec, in, out)
}

func serveChild(ctx context.Context, spec childSpec, in io.Reader, out io.Writer) error {
	logger := slog.New(slog.DiscardHandler)
	var ready childReady
	var c *Cluster
	switch spec.Role {
	case roleFloor:
		f, err := startFloor(nil)
		if err != nil {
			return err
		}
		defer f.close()
		ready.API = []string{f.addr}
	case roleLogStore:
		dir := spec.Dir
		if dir == "" {
			d, err := os.MkdirTemp("", "logstore-bench-server-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		var err error
		c, err = startCluster(filepath.Join(dir, "logstore-"+string(spec.Backend)), logger, nil, nil, func(nc *logstore.Config) {
			nc.RaftLogStore = spec.Backend
			spec.Tuning.apply(nc)
		})
		if err != nil {
			return err
		}
		defer c.Close()
		ready.API = c.APIAddrs()
		if spec.HTTP {
			if err := c.serveHTTP(nil, logger); err != nil {
				return err
			}
			for _, hs := range c.https {
				ready.HTTP = append(ready.HTTP, hs.Addr())
			}
		}
	default:
		return fmt.Errorf("bench server child: unknown role %q", spec.Role)
	}
	w := bufio.NewWriter(out)
	if err := writeLine(w, "ready", ready); err != nil {
		return err
	}
	lines := ReadLines(in, ctx.Done())
	profiling := false
	defer func() {
		if profiling {
			pprof.StopCPUProfile()
		}
	}()
	var profile *os.File
	for {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				return nil
			}
			line = l
		case <-ctx.Done():
			return nil
		}
		var err error
		switch req, arg, _ := strings.Cut(line, " "); req {
		case "stats":
			st := childStats{Leader: -1}
			if c != nil {
				b := c.batchStats()
				st = childStats{Txns: b.txns, Entries: b.entries, BatchReqs: b.batchReqs, BatchCalls: b.batchCalls,
					AppendSec: b.appendSec, Appends: b.appends, CommitSec: b.commitSec, Commits: b.commits, Leader: c.leaderIndex()}
			}
			err = writeLine(w, "stats", st)
		case "profile":
			if profiling {
				err = errors.New("a profile runs already")
			} else if profile, err = os.Create(arg); err == nil {
				if err = pprof.StartCPUProfile(profile); err != nil {
					profile.Close()
				} else {
					profiling = true
				}
			}
			if err == nil {
				err = writeLine(w, "ok", nil)
			}
		case "unprofile":
			if profiling {
				pprof.StopCPUProfile()
				profiling = false
				err = profile.Close()
			}
			if err == nil {
				err = writeLine(w, "ok", nil)
			}
		default:
			err = fmt.Errorf("unknown request %q", line)
		}
		if err != nil {
			if werr := writeLine(w, "error "+strings.ReplaceAll(err.Error(), "\n", " "), nil); werr != nil {
				return werr
			}
		}
	}
}

// ReadLines returns the lines of r, read by a goroutine of its own, on a
// channel closed at r's end or when stop is closed (its reader then gives
// up the line it holds).
func ReadLines(r io.Reader, stop <-chan struct{}) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-stop:
				return
			}
		}
	}()
	return lines
}

// writeLine writes "word JSON" (or "word" when v is nil) and flushes.
func writeLine(w *bufio.Writer, word string, v any) error {
	w.WriteString(word)
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.WriteByte(' ')
		w.Write(b)
	}
	w.WriteByte('\n')
	return w.Flush()
}

// leaderIndex is the index of the node that leads (-1: none).
func (c *Cluster) leaderIndex() int {
	for i, n := range c.Nodes {
		if n.IsLeader() {
			return i
		}
	}
	return -1
}

// serverChild is a running server child seen from the benchmark.
type serverChild struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines <-chan string // the child's stdout lines; closed at its end
	quit  chan struct{} // closed by stop or kill: the line reader gives up
	once  sync.Once     // closes quit
	done  chan struct{} // closed when the process exited
	ready childReady
}

// startServerChild starts argv as a server child of spec (its standard
// error to stderr) and waits for its ready line.
func startServerChild(argv []string, spec childSpec, stderr io.Writer) (*serverChild, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ServerChildEnv+"="+string(raw))
	cmd.Stderr = stderr
	dieWithParent(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: server child %s: %w", spec.Role, err)
	}
	c := &serverChild{cmd: cmd, in: in, quit: make(chan struct{}), done: make(chan struct{})}
	c.lines = ReadLines(out, c.quit)
	go func() { _ = cmd.Wait(); close(c.done) }()
	word, arg, err := c.next(childReadyTimeout)
	if err == nil && word != "ready" {
		err = fmt.Errorf("first line %q", word+" "+arg)
	}
	if err == nil {
		err = json.Unmarshal([]byte(arg), &c.ready)
	}
	if err != nil {
		c.kill()
		return nil, fmt.Errorf("bench: server child %s %s: %w", spec.Role, spec.Backend, err)
	}
	return c, nil
}

// next returns the child's next line as its first word and the rest; the
// child is killed when none comes within timeout.
func (c *serverChild) next(timeout time.Duration) (word, arg string, err error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			return "", "", errors.New("the child's output ended")
		}
		word, arg, _ = strings.Cut(line, " ")
		if word == "error" {
			return "", "", errors.New(arg)
		}
		return word, arg, nil
	case <-t.C:
		c.kill()
		return "", "", fmt.Errorf("no answer in %v", timeout)
	}
}

// ask sends req and returns the answer's argument once it is want.
func (c *serverChild) ask(req, want string) (string, error) {
	if _, err := io.WriteString(c.in, req+"\n"); err != nil {
		return "", fmt.Errorf("bench: server child: %s: %w", req, err)
	}
	word, arg, err := c.next(childAnswerMax)
	if err == nil && word != want {
		err = fmt.Errorf("answer %q", word+" "+arg)
	}
	if err != nil {
		return "", fmt.Errorf("bench: server child: %s: %w", req, err)
	}
	return arg, nil
}

// stats asks the child for its cluster's figures.
func (c *serverChild) stats() (childStats, error) {
	arg, err := c.ask("stats", "stats")
	if err != nil {
		return childStats{}, err
	}
	var st childStats
	return st, json.Unmarshal([]byte(arg), &st)
}

func (st childStats) batches() batches {
	return batches{txns: st.Txns, entries: st.Entries, batchReqs: st.BatchReqs, batchCalls: st.BatchCalls,
		appendSec: st.AppendSec, appends: st.Appends, commitSec: st.CommitSec, commits: st.Commits}
}

// cpu returns the CPU time the child has used so far.
func (c *serverChild) cpu() (time.Duration, error) { return procCPU(c.cmd.Process.Pid) }

// stop closes the child's stdin and waits for it to exit, killing it
// after childStopMax.
func (c *serverChild) stop() {
	_ = c.in.Close()
	t := time.NewTimer(childStopMax)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.once.Do(func() { close(c.quit) })
}

// kill ends the child at once (it failed to start or to answer).
func (c *serverChild) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.in.Close()
	c.once.Do(func() { close(c.quit) })
}

// servers is what a row reads of its LogStore cluster, in this process
// (*Cluster) or in a server process (*serverChild).
type servers interface {
	addrs() []string             // the nodes' gRPC addresses
	figures() (batches, error)   // the leaders' histograms
	httpLeader() (string, error) // the leader's HTTP API URL ("" when none leads)
}

func (c *Cluster) addrs() []string             { return c.APIAddrs() }
func (c *Cluster) figures() (batches, error)   { return c.batchStats(), nil }
func (c *Cluster) httpLeader() (string, error) { return c.leaderHTTP(), nil }

func (c *serverChild) addrs() []string { return c.ready.API }

func (c *serverChild) figures() (batches, error) {
	st, err := c.stats()
	return st.batches(), err
}

func (c *serverChild) httpLeader() (string, error) {
	st, err := c.stats()
	if err != nil || st.Leader < 0 || st.Leader >= len(c.ready.HTTP) {
		return "", err
	}
	return "http://" + c.ready.HTTP[st.Leader], nil
}
