package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // registers database/sql driver "sqlite" (pure Go, no cgo)
)

// Dialect is the SQL database a Store writes to.
type Dialect int

// The dialects.
const (
	Postgres Dialect = iota + 1
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// Tx is the open SQL transaction of one Apply (or of Setup). Queries use
// $1, $2, … placeholders in both dialects. Everything written through it
// commits with the target's State or not at all.
type Tx interface {
	Dialect() Dialect
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query that returns at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// CopyFrom inserts rows into table's columns: COPY on PostgreSQL, one
	// prepared INSERT per row on SQLite.
	CopyFrom(ctx context.Context, table string, columns []string, rows [][]any) (int64, error)
}

// Row is one result row (pgx.Row, *sql.Row).
type Row interface{ Scan(dest ...any) error }

// backend is one dialect's connection handling.
type backend interface {
	dialect() Dialect
	// begin opens a transaction and, when q is not empty, runs the one-row
	// query q into dest: on PostgreSQL BEGIN and q are one round trip (a
	// pipelined batch), as the bare loader's BEGIN costs one.
	begin(ctx context.Context, q string, args []any, dest ...any) (txn, error)
	close()
}

// txn is an open transaction: the public Tx plus its end.
type txn interface {
	Tx
	// commit runs the statement q (when not empty) and commits: on
	// PostgreSQL one round trip. It fails unless the server committed.
	commit(ctx context.Context, q string, args ...any) error
	rollback(ctx context.Context)
	rows() int64 // rows affected or copied by Exec and CopyFrom
}

// ---- PostgreSQL (pgx) ----

type pgBackend struct{ pool *pgxpool.Pool }

// pgConns bounds the pool: the applier is the only writer (one transaction at
// a time) and State reads happen between Applies, so two connections are
// plenty; a test or an operator query gets one of its own.
const pgConns = 2

func openPostgres(ctx context.Context, dsn string, lockTimeout, idleInTx time.Duration) (*pgBackend, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: DSN: %v", ErrInvalidConfig, err)
	}
	pc.MaxConns = pgConns
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	// A paused sink holding the state row's lock must not block a successor
	// for ever: the server ends its session after idleInTx, and a waiting
	// FOR UPDATE gives up after lockTimeout (a transient error, retried).
	pc.ConnConfig.RuntimeParams["lock_timeout"] = ms(lockTimeout)
	pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = ms(idleInTx)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		host := net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port)))
		return nil, fmt.Errorf("%w: %s: %s", ErrUnreachable, host, cause(err))
	}
	return &pgBackend{pool: pool}, nil
}

// cause is the one-line reason of a connection failure: the network error
// or the server's message (pgx lists every attempt, e.g. with and without
// TLS, in one long text).
func cause(err error) string {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Error()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"
	}
	return err.Error()
}

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

func (b *pgBackend) dialect() Dialect { return Postgres }
func (b *pgBackend) close()           { b.pool.Close() }

func (b *pgBackend) begin(ctx context.Context, q string, args []any, dest ...any) (txn, error) {
	c, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	t := &pgTxn{c: c}
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	if q != "" {
		batch.Queue(q, args...)
	}
	br := c.SendBatch(ctx, batch)
	_, err = br.Exec()
	if err == nil && q != "" {
		err = br.QueryRow().Scan(dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.rollback(ctx)
		return nil, err
	}
	return t, nil
}

// pgTxn is a transaction on one pooled connection, begun and ended by hand
// so that BEGIN and COMMIT ride with the statements next to them. A
// connection released in any state but idle is closed by pgxpool.
type pgTxn struct {
	c *pgxpool.Conn
	n int64
}

func (t *pgTxn) Dialect() Dialect { return Postgres }
func (t *pgTxn) rows() int64      { return t.n }

func (t *pgTxn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.c.Exec(ctx, q, args...)
	t.n += tag.RowsAffected()
	return tag.RowsAffected(), err
}

func (t *pgTxn) QueryRow(ctx context.Context, q string, args ...any) Row {
	return t.c.QueryRow(ctx, q, args...)
}

func (t *pgTxn) CopyFrom(ctx context.Context, table string, cols []string, rows [][]any) (int64, error) {
	n, err := t.c.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	t.n += n
	return n, err
}

func (t *pgTxn) commit(ctx context.Context, q string, args ...any) error {
	defer t.c.Release()
	batch := &pgx.Batch{}
	if q != "" {
		batch.Queue(q, args...)
	}
	batch.Queue("COMMIT")
	br := t.c.SendBatch(ctx, batch)
	var err error
	if q != "" {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("%q changed %d rows, want 1", q, tag.RowsAffected())
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		// COMMIT of a failed transaction answers ROLLBACK, not an error.
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("the server answered %q to COMMIT", tag.String())
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t *pgTxn) rollback(ctx context.Context) {
	_, _ = t.c.Exec(ctx, "ROLLBACK")
	t.c.Release()
}

// ---- SQLite (modernc.org/sqlite, database/sql) ----

type sqliteBackend struct{ db *sql.DB }

func openSQLite(ctx context.Context, path string, busy time.Duration) (*sqliteBackend, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: SQLite path is empty", ErrInvalidConfig)
	}
	// WAL with synchronous=FULL: a commit is fsynced before it returns.
	// _txlock=immediate: every transaction is BEGIN IMMEDIATE, so it holds
	// the database's write lock from its first statement (the state row's
	// read included) until commit — SQLite's SELECT … FOR UPDATE.
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises writers anyway
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, path, err)
	}
	return &sqliteBackend{db: db}, nil
}

func (b *sqliteBackend) dialect() Dialect { return SQLite }
func (b *sqliteBackend) close()           { _ = b.db.Close() }

func (b *sqliteBackend) begin(ctx context.Context, q string, args []any, dest ...any) (txn, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if q != "" {
		if err := tx.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
			_ = tx.Rollback()
			return nil, err
		}
	}
	return &sqliteTxn{tx: tx}, nil
}

type sqliteTxn struct {
	tx *sql.Tx
	n  int64
}

func (t *sqliteTxn) Dialect() Dialect { return SQLite }
func (t *sqliteTxn) rows() int64      { return t.n }

func (t *sqliteTxn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	t.n += n
	return n, nil
}

func (t *sqliteTxn) QueryRow(ctx context.Context, q string, args ...any) Row {
	return t.tx.QueryRowContext(ctx, q, args...)
}

func (t *sqliteTxn) CopyFrom(ctx context.Context, table string, cols []string, rows [][]any) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	marks := make([]string, len(cols))
	for i := range cols {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = quote(c)
	}
	st, err := t.tx.PrepareContext(ctx, "INSERT INTO "+quote(table)+" ("+strings.Join(quoted, ", ")+") VALUES ("+strings.Join(marks, ", ")+")")
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var n int64
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r...); err != nil {
			return n, err
		}
		n++
	}
	t.n += n
	return n, nil
}

func (t *sqliteTxn) commit(ctx context.Context, q string, args ...any) error {
	if q != "" {
		res, err := t.tx.ExecContext(ctx, q, args...)
		if err != nil {
			_ = t.tx.Rollback()
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			_ = t.tx.Rollback()
			return fmt.Errorf("%q changed %d rows, want 1", q, n)
		}
	}
	return t.tx.Commit()
}
func (t *sqliteTxn) rollback(context.Context) { _ = t.tx.Rollback() }

// quote quotes an SQL identifier (both dialects use "…").
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
