package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/pgtest"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

func TestSinkUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sink", "postgres", "--id", "s", "--addr", "127.0.0.1:1", "--dsn", "postgres://x"}, "missing required flag --topics"},
		{[]string{"sink", "sqlite", "--id", "s", "--addr", "127.0.0.1:1", "--topics", "a"}, "missing required flag --path"},
		{[]string{"sink", "sqlite", "--id", "s", "--addr", "127.0.0.1:1", "--path", "x.db", "--topics", "a", "--mode", "merge"}, "want one of append, upsert"},
		{[]string{"sink", "sqlite", "--id", "s", "--addr", "127.0.0.1:1", "--path", "x.db", "--topics", "a.b,a_b"}, `both map to table "a_b"`},
		{[]string{"sink", "sqlite", "--id", "s", "--addr", "127.0.0.1:1", "--path", "x.db", "--topics", "a", "--table-prefix", "App-"}, "table prefix"},
		{[]string{"sink", "postgres", "--id", "s", "--addr", "127.0.0.1:1", "--dsn", "postgres://x:port:y", "--topics", "a"}, "DSN"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, nil, tc.args...)
			wantUsage(t, code, errOut, tc.want)
		})
	}
}

// An unreachable database at startup: exit 1, one line naming the host and
// the cause.
func TestSinkUnreachableDatabase(t *testing.T) {
	db := closedAddr(t)
	code, _, errOut := runCLI(t, nil, "sink", "postgres", "--id", "s", "--addr", closedAddr(t),
		"--dsn", "postgres://app@"+db+"/app?connect_timeout=5", "--topics", "a")
	wantRuntimeError(t, code, errOut, "database unreachable: "+db+": dial tcp "+db+": connect: connection refused")
}

// A table of another shape: exit 1, one line naming table and column, and
// nothing created.
func TestSinkRefusesForeignTable(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.CreateDB("app")
	pgExec(t, dsn, `CREATE TABLE orders (lsn bigint NOT NULL, topic_offset bigint PRIMARY KEY, key text, value bytea NOT NULL, value_json jsonb, headers jsonb, applied_at timestamptz)`)
	code, _, errOut := runCLI(t, nil, "sink", "postgres", "--id", "s", "--addr", closedAddr(t), "--dsn", dsn, "--topics", "orders,other")
	wantRuntimeError(t, code, errOut, "table orders column key has type text, want bytea")
	if n := pgQuery(t, dsn, `SELECT count(*) FROM information_schema.tables WHERE table_name IN ('other', 'logplayer_target_state')`); n[0][0] != "0" {
		t.Fatalf("the refused start created %s tables", n[0][0])
	}
}

func pgExec(t *testing.T, dsn, q string) {
	t.Helper()
	pgQuery(t, dsn, q)
}

// pgQuery runs q and returns its rows as text.
func pgQuery(t *testing.T, dsn, q string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var r []string
		for _, v := range rows.RawValues() {
			r = append(r, string(v))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// startSink runs `logplayer sink ARGS` in-process.
func startSink(t *testing.T, args ...string) *eventsProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &eventsProc{cancel: cancel, done: make(chan int, 1), stderr: &bytes.Buffer{}}
	s := &cli.Sys{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: p.stderr}
	go func() { p.done <- app.Run(ctx, append([]string{"sink"}, args...), s) }()
	t.Cleanup(cancel)
	return p
}

func openSink(t *testing.T, p *eventsProc, addr string, epoch types.Epoch) (*targettest.Sender, *targetpb.HelloAck) {
	t.Helper()
	cc := targettest.Dial(t, addr)
	var snd *targettest.Sender
	var ack *targetpb.HelloAck
	testwait.ForErr(t, testwait.Max, "the sink to answer a Hello", func() error {
		select {
		case code := <-p.done:
			t.Fatalf("sink exited %d:\n%s", code, p.stderr)
		default:
		}
		var err error
		snd, ack, err = targettest.Open(context.Background(), cc, targettest.Hello("pg", epoch, 1))
		return err
	})
	t.Cleanup(snd.Close)
	return snd, ack
}

// TestSinkPostgresServes runs `logplayer sink postgres`, delivers to it as a
// LogPlayer does, reads its /metrics, stops it, finds the rows and the
// state row in PostgreSQL, and restarts it at that State.
func TestSinkPostgresServes(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.CreateDB("app")
	addr, metrics := closedAddr(t), closedAddr(t)
	args := []string{"postgres", "--id", "pg", "--addr", addr, "--dsn", dsn, "--topics", "orders,inventory", "--table-prefix", "lp_"}
	p := startSink(t, append(args, "--metrics-addr", metrics)...)
	snd, ack := openSink(t, p, addr, 4)
	if ack.AppliedLsn != 0 {
		t.Fatalf("new sink: HelloAck %v", ack)
	}
	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: "orders", Values: [][]byte{[]byte(`{"txn":"t1"}`)}},
		targettest.Part{Topic: "inventory", Values: [][]byte{[]byte("x")}})
	d2 := gen.Progress()
	d3 := gen.Txn(targettest.Part{Topic: "orders", Values: [][]byte{[]byte(`{"txn":"t2"}`)}})
	if err := snd.Send(d1, d2, d3); err != nil {
		t.Fatal(err)
	}
	if err := snd.WaitAck(targettest.Context(t), 3); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`target_applied_lsn{target="pg"} 3`, `sqlstore_commit_duration_seconds_count{target="pg"}`, `sqlstore_batch_rows_sum{target="pg"} 3`} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	snd.Close()
	p.stop(t)

	got := pgQuery(t, dsn, `SELECT lsn, topic_offset, value_json->>'txn' FROM lp_orders ORDER BY topic_offset`)
	if want := [][]string{{"1", "0", "t1"}, {"3", "1", "t2"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lp_orders %q, want %q", got, want)
	}
	st := pgQuery(t, dsn, `SELECT applied_lsn, epoch, state->'Topics'->>'orders', state->'Topics'->>'inventory' FROM logplayer_target_state WHERE target_id = 'pg'`)
	if want := [][]string{{"3", "4", "2", "1"}}; !reflect.DeepEqual(st, want) {
		t.Fatalf("state row %q, want %q", st, want)
	}
	p = startSink(t, args...)
	_, ack = openSink(t, p, addr, 5)
	if ack.AppliedLsn != 3 {
		t.Fatalf("after the restart: HelloAck %v", ack)
	}
	p.stop(t)
}

// TestSinkSQLiteServes runs `logplayer sink sqlite --mode upsert`, delivers
// kv mutations and a bad message with dead-lettering on, and finds the
// key/value table, the dead letter and the state row in the file.
func TestSinkSQLiteServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.db")
	addr := closedAddr(t)
	p := startSink(t, "sqlite", "--id", "pg", "--addr", addr, "--path", path, "--topics", "users", "--mode", "upsert",
		"--on-bad-message", "dead-letter")
	snd, _ := openSink(t, p, addr, 1)
	put := func(k, v string) []byte {
		b, err := proto.Marshal(&shardpb.Mutation{Op: shardpb.Mutation_PUT, Key: []byte(k), Value: []byte(v)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gen := targettest.NewLog()
	d1 := gen.Txn(targettest.Part{Topic: "users", Values: [][]byte{put("a", "1"), []byte("not a mutation"), put("a", "2")}})
	if err := snd.Send(d1); err != nil {
		t.Fatal(err)
	}
	if err := snd.WaitAck(targettest.Context(t), 1); err != nil {
		t.Fatal(err)
	}
	snd.Close()
	p.stop(t)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var key, value, reason string
	var applied int
	if err := db.QueryRow(`SELECT CAST(key AS text), CAST(value AS text) FROM users`).Scan(&key, &value); err != nil || key != "a" || value != "2" {
		t.Fatalf("users: %q=%q (%v), want a=2", key, value, err)
	}
	if err := db.QueryRow(`SELECT reason FROM logplayer_dead_letter WHERE lsn = 1 AND topic_offset = 1`).Scan(&reason); err != nil || !strings.Contains(reason, "malformed mutation") {
		t.Fatalf("dead letter: %q (%v)", reason, err)
	}
	if err := db.QueryRow(`SELECT applied_lsn FROM logplayer_target_state WHERE target_id = 'pg'`).Scan(&applied); err != nil || applied != 1 {
		t.Fatalf("state row applied_lsn %d (%v), want 1", applied, err)
	}
}
