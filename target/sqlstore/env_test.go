package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logplayer/logplayer/internal/pgtest"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

// env is one database kind the scenarios run against: a real PostgreSQL
// from pgtest (one server per top-level test, one database per scenario) or
// a real SQLite file.
type env struct {
	name string
	pg   *pgtest.Server
	n    atomic.Int64
}

// scenarios run on both databases; each gets a fresh database.
var scenarios = []struct {
	name string
	fn   func(t *testing.T, db db)
}{
	{"ApplyRestart", testApplyRestart},
	{"Fencing", testFencing},
	{"RollbackLeavesOldState", testRollback},
	{"SchemaRefused", testSchemaRefused},
	{"BadMessageRefused", testBadMessageRefused},
	{"BadMessageDeadLetter", testBadMessageDeadLetter},
	{"BadMessageThroughServer", testBadMessageThroughServer},
	{"Upsert", testUpsert},
	{"FencedThroughServer", testFencedThroughServer},
	{"KilledMidTransaction", testKilledMidTransaction},
}

// pgScenarios need PostgreSQL's server side (a session timeout).
var pgScenarios = []struct {
	name string
	fn   func(t *testing.T, db db)
}{
	{"PausedLockHolder", testPausedLockHolder},
}

func TestPostgres(t *testing.T) {
	e := &env{name: "postgres", pg: pgtest.Start(t)}
	for _, sc := range append(scenarios, pgScenarios...) {
		t.Run(sc.name, func(t *testing.T) { sc.fn(t, e.newDB(t)) })
	}
}

func TestSQLite(t *testing.T) {
	e := &env{name: "sqlite"}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { sc.fn(t, e.newDB(t)) })
	}
}

// db is one fresh database: it opens Stores on it and queries it on a
// connection of its own.
type db struct {
	t    *testing.T
	base sqlstore.Config
	pg   *pgtest.Server // nil for SQLite
}

func (e *env) newDB(t *testing.T) db {
	if e.pg != nil {
		name := fmt.Sprintf("db%d", e.n.Add(1))
		return db{t: t, pg: e.pg, base: sqlstore.Config{Dialect: sqlstore.Postgres, DSN: e.pg.CreateDB(name)}}
	}
	return db{t: t, base: sqlstore.Config{Dialect: sqlstore.SQLite, Path: filepath.Join(t.TempDir(), "sink.db")}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mapping returns the built-in mapping for topics.
func mapping(t *testing.T, id string, mc sqlstore.MappingConfig) *sqlstore.Mapping {
	t.Helper()
	mc.TargetID = types.TargetID(id)
	m, err := sqlstore.NewMapping(mc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// open opens a Store for target id with mapping m; closed at cleanup.
func (d db) open(id string, m *sqlstore.Mapping) *sqlstore.Store {
	d.t.Helper()
	s, err := d.tryOpen(id, m)
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

func (d db) tryOpen(id string, m *sqlstore.Mapping) (*sqlstore.Store, error) {
	cfg := d.base
	cfg.TargetID = types.TargetID(id)
	cfg.Apply, cfg.Setup = m.Apply, m.Setup
	s, err := sqlstore.Open(ctxT(d.t), cfg)
	if err == nil {
		d.t.Cleanup(s.Close)
	}
	return s, err
}

// query runs q on its own connection and returns every row as strings.
func (d db) query(q string, args ...any) [][]string {
	d.t.Helper()
	ctx := ctxT(d.t)
	if d.pg != nil {
		c, err := pgx.Connect(ctx, d.base.DSN)
		if err != nil {
			d.t.Fatal(err)
		}
		defer c.Close(ctx)
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			d.t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var out [][]string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				d.t.Fatal(err)
			}
			out = append(out, strs(vals))
		}
		if err := rows.Err(); err != nil {
			d.t.Fatal(err)
		}
		return out
	}
	return sqliteQuery(d.t, d.base.Path, q, args...)
}

// strs renders values the same way for both drivers: bytes as text.
func strs(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		switch v := v.(type) {
		case nil:
			out[i] = "NULL"
		case []byte:
			out[i] = string(v)
		case string:
			out[i] = v
		default:
			out[i] = fmt.Sprint(v)
		}
	}
	return out
}
