package targetqueue

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// TestGolden runs the scenarios in testdata/*.txt. Each case is a command
// line, a line "----", and the expected output up to a blank line. The output
// is the command's result (if any) and the queue's String() after it.
// Regenerate with `go test ./targetqueue -run TestGolden -rewrite` and
// review the diff.
//
// Commands:
//
//	new [max-count=N] [max-bytes=N]
//	push lsn=N main|catchup term=N [bytes=N] [progress]
//	front | pop | suspend | return
//	fc term=N
//	batch count=N bytes=N
//	ack lsn=N
//	len | inflight
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runGoldenFile(t, file) })
	}
}

type goldenCase struct {
	line     int
	cmd      string
	expected string
}

func runGoldenFile(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var q *Queue
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		c := goldenCase{line: i + 1, cmd: line}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", file, i+1, line)
		}
		i += 2
		var exp []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			exp = append(exp, lines[i])
		}
		c.expected = strings.Join(exp, "\n")
		got := runGoldenCmd(t, &q, c)
		out.WriteString(c.cmd + "\n----\n" + got + "\n")
		if i < len(lines) {
			out.WriteString("\n")
		}
		if !*rewrite && got != c.expected {
			t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", file, c.line, c.cmd, got, c.expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runGoldenCmd runs one command; a panic becomes the output "panic: …".
func runGoldenCmd(t *testing.T, qp **Queue, c goldenCase) (out string) {
	fields := strings.Fields(c.cmd)
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	num := func(k string) int64 {
		v, ok := args[k]
		if !ok {
			t.Fatalf("line %d: %s needs %s=", c.line, fields[0], k)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("line %d: %s=%q: %v", c.line, k, v, err)
		}
		return n
	}
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v\n%s", r, *qp)
		}
	}()
	if fields[0] != "new" && *qp == nil {
		t.Fatalf("line %d: %s before new", c.line, fields[0])
	}
	q := *qp
	var res string
	switch fields[0] {
	case "new":
		var cfg Config
		if _, ok := args["max-count"]; ok {
			cfg.MaxCount = int(num("max-count"))
		}
		if _, ok := args["max-bytes"]; ok {
			cfg.MaxBytes = num("max-bytes")
		}
		*qp = New(cfg)
		q = *qp
		res = fmt.Sprintf("max-count=%d max-bytes=%d", q.cfg.MaxCount, q.cfg.MaxBytes)
	case "push":
		_, main := args["main"]
		_, catchup := args["catchup"]
		if main == catchup {
			t.Fatalf("line %d: push needs exactly one of main, catchup", c.line)
		}
		m := Msg{LSN: types.LSN(num("lsn"))}
		if _, ok := args["bytes"]; ok {
			m.Bytes = num("bytes")
		}
		if _, ok := args["progress"]; !ok {
			m.Slices = []*logstorepb.TxnSlice{{Topic: "t"}}
		}
		res = q.Push(m, main, types.Term(num("term"))).String()
	case "front":
		if m, ok := q.Front(); ok {
			res = fmt.Sprintf("lsn=%d bytes=%d progress=%t", m.LSN, m.Bytes, m.IsProgress())
		} else {
			res = "none"
		}
	case "pop":
		q.Pop()
	case "suspend":
		q.Suspend()
	case "return":
		res = fmt.Sprintf("term=%d", q.Return())
	case "fc":
		res = strconv.FormatBool(q.FetchingCompleted(types.Term(num("term"))))
	case "batch":
		var lsns []string
		for _, m := range q.NextBatch(int(num("count")), num("bytes")) {
			lsns = append(lsns, strconv.FormatUint(uint64(m.LSN), 10))
		}
		res = "batch=[" + strings.Join(lsns, " ") + "]"
	case "ack":
		n, b := q.Ack(types.LSN(num("lsn")))
		res = fmt.Sprintf("released=%d bytes=%d", n, b)
	case "len":
		n, c := q.Len()
		nb, cb := q.Bytes()
		res = fmt.Sprintf("normal=%d/%dB catchup=%d/%dB", n, nb, c, cb)
	case "inflight":
		n, b := q.InFlight()
		res = fmt.Sprintf("inflight=%d/%dB last-sent=%d", n, b, q.LastSent())
	default:
		t.Fatalf("line %d: unknown command %q", c.line, fields[0])
	}
	if res == "" {
		return q.String()
	}
	return res + "\n" + q.String()
}
