package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	lsbench "github.com/logplayer/logplayer/logstore/bench"
	"github.com/logplayer/logplayer/types"
)

// Child processes (Config.Spawn) talk to the benchmark in lines: the child
// writes "ready ADDRS" once it serves (the LogStore's API addresses
// comma-separated, or the target's address); a target answers "drain LSN"
// on its stdin, once it has applied LSN, with its timing events ("r SENT
// DISPATCHED RECEIVED", "a SENT APPLIED", Unix nanoseconds) and "end", or
// with "error MESSAGE". Closing its stdin stops the child.

// childStopMax bounds a child's clean exit after its stdin closed; then it
// is killed.
const childStopMax = 30 * time.Second

// ServeChild is the body of a benchmark child process (Config.Spawn): args
// are what the benchmark passes (--role logstore|target, --id, --dir,
// --memory); in and out are the process's stdin and stdout. It returns when
// in ends (the benchmark closed it) or ctx is done.
func ServeChild(ctx context.Context, args []string, in io.Reader, out io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("bench child", flag.ContinueOnError)
	role := fs.String("role", "", "logstore or target")
	id := fs.String("id", "", "target id")
	dir := fs.String("dir", "", "data directory")
	memory := fs.Bool("memory", false, "in-memory target (no disk)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if *dir == "" {
		return errors.New("bench child: --dir is required")
	}
	w := bufio.NewWriter(out)
	lines := lsbench.ReadLines(in, ctx.Done()) // stdin lines; closed at EOF
	switch *role {
	case "logstore":
		c, err := lsbench.StartCluster(*dir, logger)
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintf(w, "ready %s\n", strings.Join(c.APIAddrs(), ","))
		if err := w.Flush(); err != nil {
			return err
		}
		for {
			select {
			case _, ok := <-lines:
				if !ok {
					return nil
				}
			case <-ctx.Done():
				return nil
			}
		}
	case "target":
		if *id == "" {
			return errors.New("bench child: --id is required")
		}
		rec := &recorder{}
		t, err := startLocalTarget(*dir, *id, *memory, rec, Config{Logger: logger})
		if err != nil {
			return err
		}
		defer t.close()
		fmt.Fprintf(w, "ready %s\n", t.address())
		if err := w.Flush(); err != nil {
			return err
		}
		for {
			var line string
			var ok bool
			select {
			case line, ok = <-lines:
				if !ok {
					return nil
				}
			case <-ctx.Done():
				return nil
			}
			if err := answerDrain(ctx, t, rec, line, w); err != nil {
				fmt.Fprintf(w, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("bench child: unknown --role %q", *role)
	}
}

// answerDrain answers one "drain LSN" request of a target child.
func answerDrain(ctx context.Context, t *localTarget, rec *recorder, line string, w io.Writer) error {
	arg, ok := strings.CutPrefix(line, "drain ")
	lsn, err := strconv.ParseUint(arg, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("bad request %q", line)
	}
	wctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := t.waitApplied(wctx, types.LSN(lsn)); err != nil {
		return err
	}
	recv, apply := rec.take()
	for _, e := range recv {
		fmt.Fprintf(w, "r %d %d %d\n", e.sent, e.dispatched, e.received)
	}
	for _, e := range apply {
		fmt.Fprintf(w, "a %d %d\n", e.sent, e.applied)
	}
	_, err = io.WriteString(w, "end\n")
	return err
}

// child is a running child process seen from the benchmark.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	done chan struct{} // closed when the process exited
}

// startChild starts a child with args and waits (at most readyTimeout) for
// its ready line; it returns the line's argument.
func startChild(spawn func(args ...string) *exec.Cmd, args ...string) (*child, string, error) {
	cmd := spawn(args...)
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("bench child %v: %w", args, err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out), done: make(chan struct{})}
	line, err := c.readLine(context.Background(), readyTimeout)
	if err == nil {
		if addrs, ok := strings.CutPrefix(line, "ready "); ok {
			go func() { _ = cmd.Wait(); close(c.done) }()
			return c, addrs, nil
		}
		err = fmt.Errorf("unexpected first line %q", line)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", fmt.Errorf("bench child %v: %w", args, err)
}

// readLine reads one line of the child's output; the child is killed if
// none comes within timeout or ctx ends first.
func (c *child) readLine(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.AfterFunc(timeout, func() { _ = c.cmd.Process.Kill() })
	defer t.Stop()
	stop := context.AfterFunc(ctx, func() { _ = c.cmd.Process.Kill() })
	defer stop()
	line, err := c.out.ReadString('\n')
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("child output ended: %w", err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// stop closes the child's stdin and waits for it to exit (killing it after
// childStopMax).
func (c *child) stop() {
	_ = c.in.Close()
	select {
	case <-c.done:
	case <-time.After(childStopMax):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// procTarget is a target in a child process.
type procTarget struct {
	c    *child
	addr string
}

var _ benchTarget = (*procTarget)(nil)

func startProcTarget(spawn func(args ...string) *exec.Cmd, dir, id string, memory bool) (*procTarget, error) {
	args := []string{"--role", "target", "--id", id, "--dir", dir}
	if memory {
		args = append(args, "--memory")
	}
	c, addr, err := startChild(spawn, args...)
	if err != nil {
		return nil, err
	}
	return &procTarget{c: c, addr: addr}, nil
}

func (p *procTarget) address() string { return p.addr }

func (p *procTarget) drain(ctx context.Context, lsn types.LSN, rec *recorder) error {
	if _, err := fmt.Fprintf(p.c.in, "drain %d\n", lsn); err != nil {
		return err
	}
	var recv []recvEvent
	var apply []applyEvent
	for {
		line, err := p.c.readLine(ctx, readyTimeout)
		if err != nil {
			return err
		}
		if line == "end" {
			rec.add(recv, apply)
			return nil
		}
		if msg, ok := strings.CutPrefix(line, "error "); ok {
			return fmt.Errorf("target %s: %s", p.addr, msg)
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			return fmt.Errorf("target %s: empty line", p.addr)
		}
		var n []int64
		for _, s := range f[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return fmt.Errorf("target %s: bad line %q", p.addr, line)
			}
			n = append(n, v)
		}
		switch {
		case f[0] == "r" && len(n) == 3:
			recv = append(recv, recvEvent{n[0], n[1], n[2]})
		case f[0] == "a" && len(n) == 2:
			apply = append(apply, applyEvent{n[0], n[1]})
		default:
			return fmt.Errorf("target %s: bad line %q", p.addr, line)
		}
	}
}

func (p *procTarget) applied() types.LSN { return 0 }

func (p *procTarget) close() { p.c.stop() }
