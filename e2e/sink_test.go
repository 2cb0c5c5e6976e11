package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/internal/pgtest"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// The SQL sink (`logplayer sink postgres`) under faults with real
// processes: a LogStore cluster, a LogPlayer, the sink, and a real
// PostgreSQL reached through a proxy the test can cut. After each fault,
// once the sink caught up, every table must hold exactly the log's messages
// of its topic (read back from the LogStore): each once, at its offset,
// with its LSN, key and value, nothing else, no partial transaction.

const sinkID = "pg"

// sinkTable is a topic of the sink and its table (sqlstore.TableName).
type sinkTable struct{ topic, table string }

// sinkTopics are the sink tests' topics and their tables.
var sinkTopics = []sinkTable{{"sq.a", "sq_a"}, {"sq-b", "sq_b"}}

// sinkEnv is the system around the sink.
type sinkEnv struct {
	t     *testing.T
	c     *cluster
	pg    *pgtest.Server // nil with SQLite
	dsn   string         // direct, for the checks
	proxy *proxy         // between the sinks and PostgreSQL
	// lite is the SQLite file of a `sink sqlite` ("": `sink postgres`).
	lite string
	// tables are the sink's topics and tables (sinkTopics, or the
	// nemesis's).
	tables []sinkTable
	sink   *proc
	addr   string // the sink's Target address
	// player is the LogPlayer delivering to the sink.
	player *proc
	acked  atomic.Int64 // acknowledged Appends of the producer
}

// sinkOptions vary startSinkOnly.
type sinkOptions struct {
	cluster clusterOptions // noPlayer is set
	// sqlite runs `sink sqlite` on a file instead of `sink postgres`.
	sqlite bool
}

// startSinkEnv starts the system with one ungrouped LogPlayer.
func startSinkEnv(t *testing.T, o sinkOptions) *sinkEnv {
	e := startSinkOnly(t, o)
	e.player = e.newPlayer("player", e.addr)
	e.player.start()
	return e
}

// startSinkOnly starts the database (PostgreSQL and the proxy, or a SQLite
// file), the cluster of o and the sink; the caller starts the LogPlayers.
func startSinkOnly(t *testing.T, o sinkOptions) *sinkEnv {
	e := &sinkEnv{t: t, tables: sinkTopics}
	if o.sqlite {
		e.lite = filepath.Join(t.TempDir(), "sink.db")
	} else {
		e.pg = pgtest.Start(t)
		e.dsn = e.pg.CreateDB("app")
		e.proxy = newProxy(t, "postgres", e.pg.Addr())
	}
	o.cluster.noPlayer = true
	e.c = startClusterWith(t, o.cluster)
	e.addr = freeAddr(t)
	e.sink = e.newSink("sink", e.addr)
	e.sink.start()
	return e
}

// newSink is a sink process for target sinkID serving on addr, reaching
// PostgreSQL through the proxy (or writing the SQLite file).
func (e *sinkEnv) newSink(name, addr string) *proc {
	var topics []string
	for _, s := range e.tables {
		topics = append(topics, s.topic)
	}
	db := []string{"sqlite", "--path", e.lite}
	if e.lite == "" {
		db = []string{"postgres", "--dsn", e.pg.DSN("app", e.proxy.addr) + "&connect_timeout=5"}
	}
	args := []string{"sink", db[0], "--id", sinkID, "--addr", addr, db[1], db[2],
		"--topics", strings.Join(topics, ","), "--db-timeout", "10s", "--lock-timeout", "5s"}
	// The sink serves with the events target's certificate: the bundle's
	// identities are fixed, and the LogPlayer checks the CA and the host.
	if e.c.tls != nil { // nil: the nemesis's -nemesis-plaintext
		args = append(args, e.c.tls.args(eventsTarget)...)
	}
	return newProc(e.t, e.c.dir, name, args...)
}

// newPlayer is a LogPlayer (a new epoch when started) delivering to the
// sink at addr.
func (e *sinkEnv) newPlayer(name, addr string) *proc {
	args := append(e.c.playerArgs(), "--target", e.targetSpec(addr),
		"--admin-addr", freeAddr(e.t), "--metrics-addr", freeAddr(e.t))
	return newProc(e.t, e.c.dir, name, args...)
}

// targetSpec is the LogPlayer's --target flag for the sink at addr.
func (e *sinkEnv) targetSpec(addr string) string {
	var topics []string
	for _, s := range e.tables {
		topics = append(topics, s.topic)
	}
	return fmt.Sprintf("%s=%s/%s", sinkID, addr, strings.Join(topics, ","))
}

// produce appends multi-topic transactions until stop: 1-3 messages to
// the first topic (JSON, keyed), 1 to the second (binary), in one
// transaction each.
func (e *sinkEnv) produce() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				var msgs []*logstorepb.Message
				for j := range 1 + i%3 {
					msgs = append(msgs, &logstorepb.Message{Key: fmt.Appendf(nil, "w%d-%d", w, i),
						Value: fmt.Appendf(nil, `{"w":%d,"i":%d,"j":%d}`, w, i, j)})
				}
				req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{
					{Topic: sinkTopics[0].topic, Messages: msgs},
					{Topic: sinkTopics[1].topic, Messages: []*logstorepb.Message{{Value: []byte{0, byte(w), byte(i), 0xff}}}},
				}}
				actx, acancel := context.WithTimeout(ctx, rpcTimeout)
				_, err := e.c.client.Append(actx, req)
				acancel()
				if err == nil {
					e.acked.Add(1)
				}
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// waitAcked waits for n more acknowledged Appends (writes go on).
func (e *sinkEnv) waitAcked(n int64) {
	e.t.Helper()
	want := e.acked.Load() + n
	e.c.waitFor(progressMax, fmt.Sprintf("%d acknowledged appends", want), func() error {
		if got := e.acked.Load(); got < want {
			return fmt.Errorf("%d acknowledged", got)
		}
		return nil
	})
}

// sinkRow is one row of a sink table, or one message of the log.
type sinkRow struct {
	lsn, offset int64
	key, value  string
}

// logRows reads the log [1, head] back: per topic, its messages in offset
// order.
func (e *sinkEnv) logRows(ctx context.Context, head uint64) (map[string][]sinkRow, error) {
	out := map[string][]sinkRow{}
	err := demo.ReadLog(ctx, e.c.client, 1, head, func(t *logstorepb.Transaction) error {
		for _, sl := range t.Slices {
			for i, m := range sl.Messages {
				off := int64(sl.FirstOffset) + int64(i)
				if int64(len(out[sl.Topic])) != off {
					return fmt.Errorf("lsn %d: topic %s offset %d after %d messages", t.Lsn, sl.Topic, off, len(out[sl.Topic]))
				}
				out[sl.Topic] = append(out[sl.Topic], sinkRow{int64(t.Lsn), off, string(m.Key), string(m.Value)})
			}
		}
		return nil
	})
	return out, err
}

// openDB opens the sink's database for the checks (database/sql: pgx's
// stdlib driver, or modernc's SQLite).
func (e *sinkEnv) openDB() *sql.DB {
	e.t.Helper()
	driver, name := "pgx", e.dsn
	if e.lite != "" {
		driver, name = "sqlite", "file:"+e.lite+"?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(driver, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}

// tableRows reads a table's rows with an LSN up to head, in offset order.
func (e *sinkEnv) tableRows(ctx context.Context, db *sql.DB, table string, head uint64) ([]sinkRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT lsn, topic_offset, coalesce(key, ''), value FROM `+table+
		` WHERE lsn <= $1 ORDER BY topic_offset`, int64(head))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sinkRow
	for rows.Next() {
		var r sinkRow
		var k, v []byte
		if err := rows.Scan(&r.lsn, &r.offset, &k, &v); err != nil {
			return nil, err
		}
		r.key, r.value = string(k), string(v)
		out = append(out, r)
	}
	return out, rows.Err()
}

// check waits until the sink's state row covers the log's head, then
// compares every table with the log read back: exactly the log's messages
// of its topic up to the head, each once, in order.
func (e *sinkEnv) check(what string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	st, err := e.c.client.LeaderStatus(ctx)
	if err != nil {
		e.t.Fatalf("leader status: %v", err)
	}
	head := st.HeadLsn
	want, err := e.logRows(ctx, head)
	if err != nil {
		e.t.Fatalf("read the log back: %v", err)
	}
	conn := e.openDB()
	defer conn.Close()
	e.c.waitFor(catchUpMax, fmt.Sprintf("the sink to store the log through lsn %d (%s)", head, what), func() error {
		var doc []byte
		if err := conn.QueryRowContext(ctx, `SELECT state FROM logplayer_target_state WHERE target_id = $1`, sinkID).Scan(&doc); err != nil {
			return err
		}
		var s struct{ Topics map[string]int }
		if err := json.Unmarshal(doc, &s); err != nil {
			return err
		}
		for _, tp := range e.tables {
			if s.Topics[tp.topic] < len(want[tp.topic]) {
				return fmt.Errorf("topic %s at offset %d, the log has %d", tp.topic, s.Topics[tp.topic], len(want[tp.topic]))
			}
		}
		return nil
	})
	total := 0
	for _, tp := range e.tables {
		got, err := e.tableRows(ctx, conn, tp.table, head)
		if err != nil {
			e.t.Fatalf("read table %s: %v", tp.table, err)
		}
		if err := sameRows(got, want[tp.topic]); err != nil {
			e.t.Fatalf("after %s: table %s differs from topic %s of the log through lsn %d: %v", what, tp.table, tp.topic, head, err)
		}
		total += len(got)
	}
	e.t.Logf("after %s: the tables hold exactly the log's %d messages through lsn %d", what, total, head)
}

// sameRows names the first difference between a table and the log.
func sameRows(got, want []sinkRow) error {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Errorf("row %d is %+v, the log has %+v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, the log has %d messages", len(got), len(want))
	}
	return nil
}

// TestSinkUnderFaults: kill -9 of the sink during delivery; an immediate
// stop (crash) and restart of PostgreSQL; the network between the sink and
// PostgreSQL cut and restored; the sink SIGSTOPped while a second sink
// process for the same target id and a second LogPlayer (a new epoch) take
// over, then resumed: its late commits must be refused by the fencing
// inside the database. The tables are checked against the log after each.
func TestSinkUnderFaults(t *testing.T) {
	e := startSinkEnv(t, sinkOptions{})
	stop := e.produce()
	defer stop()
	e.waitAcked(200)
	e.check("start")

	// kill -9 during delivery.
	e.sink.kill()
	e.waitAcked(100)
	e.sink.start()
	e.waitAcked(100)
	e.check("kill -9 of the sink")

	// PostgreSQL crashes (no checkpoint, WAL replay) and comes back.
	e.pg.Stop("immediate")
	e.waitAcked(100)
	e.pg.Start()
	e.waitAcked(100)
	e.check("pg_ctl stop -m immediate and restart")

	// The network between the sink and PostgreSQL is cut past the sink's
	// --db-timeout, then restored.
	e.proxy.cut()
	e.waitAcked(100)
	e.c.waitFor(progressMax, "the sink to report the database lost", func() error {
		if !logHas(e.sink, "store failure") {
			return errors.New("no store failure logged yet")
		}
		return nil
	})
	e.proxy.heal()
	e.waitAcked(100)
	e.check("network cut between the sink and PostgreSQL")

	// Takeover: the sink pauses; a second sink process (same target id,
	// same database, another address) and a second LogPlayer take over;
	// the first resumes under its old LogPlayer.
	old, oldPlayer := e.sink, e.player
	old.signal(syscall.SIGSTOP)
	e.addr = freeAddr(t)
	e.sink = e.newSink("sink-b", e.addr)
	e.sink.start()
	e.player = e.newPlayer("player-b", e.addr)
	e.player.start()
	e.waitAcked(200)
	e.check("the takeover by a second sink process")
	old.signal(syscall.SIGCONT)
	// Its batches are refused by the state row's check (ErrFenced), or, once
	// it reloaded the row, its LogPlayer's Hello is (STALE_EPOCH: its own
	// memory still says epoch 1, only the database knows the newer one).
	var fenced string
	e.c.waitFor(progressMax, "the resumed sink to be refused by the database's fencing", func() error {
		for _, s := range []string{"sqlstore: fenced", "is below the highest epoch seen"} {
			if fenced = sinkLogLine(old, s); fenced != "" {
				return nil
			}
		}
		return errors.New("no fencing logged by the resumed sink yet")
	})
	t.Logf("the resumed sink: %s", fenced)
	e.waitAcked(200)
	oldPlayer.kill()
	old.kill()
	stop()
	e.check("the resumed old sink (fenced), load stopped")
	for _, p := range []*proc{old, e.sink} {
		p.checkLog()
	}
}

// TestSQLiteSinkKilled: `logplayer sink sqlite` killed with SIGKILL during
// delivery, three times, and restarted on its file: each time the tables
// must hold exactly the log's messages (SQLite's WAL and the state row in
// the batch's transaction: no batch half there, none twice).
func TestSQLiteSinkKilled(t *testing.T) {
	e := startSinkEnv(t, sinkOptions{sqlite: true})
	stop := e.produce()
	defer stop()
	e.waitAcked(200)
	e.check("start")
	for i := range 3 {
		e.sink.kill()
		e.waitAcked(50)
		e.sink.start()
		e.waitAcked(100)
		e.check(fmt.Sprintf("kill -9 %d of the sqlite sink", i+1))
	}
	stop()
	e.check("the load stopped")
	e.sink.checkLog()
}

// logHas reports whether p's log contains s.
func logHas(p *proc, s string) bool { return sinkLogLine(p, s) != "" }

// sinkLogLine is the first line of p's log containing s ("" when none).
func sinkLogLine(p *proc, s string) string {
	b, _ := os.ReadFile(p.log)
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			return string(l)
		}
	}
	return ""
}
