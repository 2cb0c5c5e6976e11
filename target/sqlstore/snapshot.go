package sqlstore

import (
	"context"
	"database/sql"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/logplayer/logplayer/target"
)

// Snapshot and restore of a SQL store (target.Snapshotter; issue #29).
//
// A snapshot holds the rows of Config.SnapshotTables (the Mapping's tables:
// Mapping.Tables) and the State of the target's row, read in ONE read
// transaction: PostgreSQL REPEATABLE READ READ ONLY (one MVCC snapshot;
// Apply goes on meanwhile), SQLite the store's one connection (its
// transactions take the write lock: an Apply waits for the snapshot).
//
// Encoding: a gob stream of snapFrames. Each table opens with a frame
// naming it and its columns; PostgreSQL then sends the table's COPY …
// (FORMAT binary) stream cut into frames (exact for every type, jsonb
// included), SQLite its rows (int64, float64, []byte, string, time, NULL)
// in frames of snapRowsPerFrame; a frame with End closes the table.
//
// A restore runs in ONE SQL transaction (the staging area): it locks the
// target's row, refuses a target that has an applied LSN, topics or rows
// in its tables (target.ErrNotEmpty), loads every table (COPY FROM STDIN
// binary; SQLite prepared INSERTs), writes the State into the row and
// commits. An interrupted restore (the stream broke, the process died)
// rolls back: nothing of it is visible and the next one starts afresh.
// Dead-letter rows are not carried (they describe the sibling's refusals).

// snapFrame is one element of a SQL snapshot stream.
type snapFrame struct {
	Table   string   // a table starts: its name
	Columns []string // and its columns, in the order of Data or Rows
	Data    []byte   // PostgreSQL: a piece of the table's COPY binary stream
	Rows    [][]any  // SQLite: rows
	End     bool     // the table is complete
}

// snapRowsPerFrame bounds a SQLite frame (rows of a few KB each).
const snapRowsPerFrame = 256

func init() {
	gob.Register(time.Time{}) // a SQLite value a row may hold
}

var _ target.Snapshotter = (*Store)(nil)

// SnapshotFormat implements target.Snapshotter: the dialect's format.
func (s *Store) SnapshotFormat() string { return "sqlstore/" + s.cfg.Dialect.String() + "/1" }

// Tables returns the Mapping's tables, one per topic in the order of
// MappingConfig.Topics (Config.SnapshotTables of a store using it).
func (m *Mapping) Tables() []string {
	out := make([]string, 0, len(m.cfg.Topics))
	for _, t := range m.cfg.Topics {
		out = append(out, m.tables[t])
	}
	return out
}

// errNoTables: Snapshot or Restore of a store configured without tables.
var errNoTables = fmt.Errorf("%w: sqlstore: Config.SnapshotTables is empty: the store does not know which tables are its data",
	target.ErrSnapshotUnsupported)

// Snapshot implements target.Snapshotter (see the file comment).
func (s *Store) Snapshot(ctx context.Context, begin func(target.State) (io.Writer, error)) error {
	if len(s.cfg.SnapshotTables) == 0 {
		return errNoTables
	}
	switch b := s.b.(type) {
	case *pgBackend:
		return s.snapshotPostgres(ctx, b.pool, begin)
	case *sqliteBackend:
		return s.snapshotSQLite(ctx, b.db, begin)
	}
	return fmt.Errorf("sqlstore: no snapshot for %v", s.cfg.Dialect)
}

func (s *Store) snapshotPostgres(ctx context.Context, pool *pgxpool.Pool, begin func(target.State) (io.Writer, error)) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return err
	}
	defer c.Exec(context.WithoutCancel(ctx), "ROLLBACK") //nolint:errcheck // read only
	enc, err := s.snapshotBegin(c.QueryRow(ctx, s.stateQuery(false), string(s.cfg.TargetID)), begin)
	if err != nil {
		return err
	}
	for _, table := range s.cfg.SnapshotTables {
		cols, err := pgColumns(ctx, c, table)
		if err != nil {
			return err
		}
		if err := enc.Encode(snapFrame{Table: table, Columns: cols}); err != nil {
			return err
		}
		fw := &frameWriter{enc: enc}
		if _, err := c.Conn().PgConn().CopyTo(ctx, fw, "COPY "+quote(table)+" ("+quoteAll(cols)+") TO STDOUT (FORMAT binary)"); err != nil {
			return fmt.Errorf("sqlstore: copy %s out: %w", table, err)
		}
		if err := enc.Encode(snapFrame{End: true}); err != nil {
			return err
		}
	}
	return nil
}

// pgColumns are table's columns in their order.
func pgColumns(ctx context.Context, c *pgxpool.Conn, table string) ([]string, error) {
	rows, err := c.Query(ctx, "SELECT column_name FROM information_schema.columns "+
		"WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position", table)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: columns of %s: %w", table, err)
	}
	var cols []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		cols = append(cols, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(cols) == 0 {
		return nil, fmt.Errorf("sqlstore: columns of %s: %d found (%v)", table, len(cols), err)
	}
	return cols, nil
}

// frameWriter turns what COPY TO writes into Data frames.
type frameWriter struct{ enc *gob.Encoder }

func (f *frameWriter) Write(p []byte) (int, error) {
	if err := f.enc.Encode(snapFrame{Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *Store) snapshotSQLite(ctx context.Context, db *sql.DB, begin func(target.State) (io.Writer, error)) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read only
	enc, err := s.snapshotBegin(tx.QueryRowContext(ctx, s.stateQuery(false), string(s.cfg.TargetID)), begin)
	if err != nil {
		return err
	}
	for _, table := range s.cfg.SnapshotTables {
		if err := sqliteTable(ctx, tx, table, enc); err != nil {
			return err
		}
	}
	return nil
}

// sqliteTable writes table's frames.
func sqliteTable(ctx context.Context, tx *sql.Tx, table string, enc *gob.Encoder) error {
	rows, err := tx.QueryContext(ctx, "SELECT * FROM "+quote(table))
	if err != nil {
		return fmt.Errorf("sqlstore: read %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	if err := enc.Encode(snapFrame{Table: table, Columns: cols}); err != nil {
		return err
	}
	var batch [][]any
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if batch = append(batch, row); len(batch) == snapRowsPerFrame {
			if err := enc.Encode(snapFrame{Rows: batch}); err != nil {
				return err
			}
			batch = nil
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		if err := enc.Encode(snapFrame{Rows: batch}); err != nil {
			return err
		}
	}
	return enc.Encode(snapFrame{End: true})
}

// Restore implements target.Snapshotter (see the file comment).
func (s *Store) Restore(ctx context.Context, st target.State, r io.Reader) (target.State, error) {
	if len(s.cfg.SnapshotTables) == 0 {
		return target.State{}, errNoTables
	}
	lsn, epoch, doc, err := encodeState(st)
	if err != nil {
		return target.State{}, err
	}
	var cur stateRow
	tx, err := s.b.begin(ctx, s.stateQuery(true), []any{string(s.cfg.TargetID)}, &cur.lsn, &cur.epoch, &cur.doc)
	if err != nil {
		return target.State{}, fmt.Errorf("sqlstore: begin and lock the state row of %s: %w", s.cfg.TargetID, err)
	}
	err = s.restoreIn(ctx, tx, cur, r)
	if err != nil {
		rollback(tx)
		return target.State{}, err
	}
	if err := tx.commit(ctx, "UPDATE "+quote(StateTable)+
		" SET applied_lsn = $2, epoch = $3, state = $4, updated_at = $5 WHERE target_id = $1",
		string(s.cfg.TargetID), lsn, epoch, doc, s.cfg.Now().UTC()); err != nil {
		return target.State{}, fmt.Errorf("sqlstore: commit the restore: %w", err)
	}
	s.known = st.Clone()
	return st.Clone(), nil
}

// restoreIn checks that the target is empty and loads the snapshot's
// tables inside tx.
func (s *Store) restoreIn(ctx context.Context, tx txn, cur stateRow, r io.Reader) error {
	have, err := s.decodeRow(cur)
	if err != nil {
		return err
	}
	if have.AppliedLSN != 0 || len(have.Topics) != 0 {
		return fmt.Errorf("%w: target %s holds applied lsn %d and topics %v", target.ErrNotEmpty, s.cfg.TargetID, have.AppliedLSN, have.Topics)
	}
	for _, table := range s.cfg.SnapshotTables {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+quote(table)).Scan(&n); err != nil {
			return fmt.Errorf("sqlstore: count the rows of %s: %w", table, err)
		}
		if n > 0 {
			return fmt.Errorf("%w: table %s holds %d rows", target.ErrNotEmpty, table, n)
		}
	}
	dec := gob.NewDecoder(r)
	var done []string
	for {
		var f snapFrame
		if err := dec.Decode(&f); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("sqlstore: restore: %w", err)
		}
		switch {
		case f.Table == "":
			return fmt.Errorf("%w: a frame outside a table", target.ErrSnapshotMismatch)
		case !slices.Contains(s.cfg.SnapshotTables, f.Table) || slices.Contains(done, f.Table):
			return fmt.Errorf("%w: table %s is not one of this store's %v (or twice)", target.ErrSnapshotMismatch, f.Table, s.cfg.SnapshotTables)
		}
		var err error
		switch t := tx.(type) {
		case *pgTxn:
			err = restorePgTable(ctx, t, f, dec)
		case *sqliteTxn:
			err = restoreSQLiteTable(ctx, t, f, dec)
		}
		if err != nil {
			return err
		}
		done = append(done, f.Table)
	}
	if len(done) != len(s.cfg.SnapshotTables) {
		return fmt.Errorf("%w: the snapshot holds tables %v, this store %v", target.ErrSnapshotMismatch, done, s.cfg.SnapshotTables)
	}
	return nil
}

// restorePgTable feeds the table's Data frames to COPY FROM STDIN.
func restorePgTable(ctx context.Context, t *pgTxn, head snapFrame, dec *gob.Decoder) error {
	pr, pw := io.Pipe()
	copied := make(chan error, 1) // the COPY's result
	go func() {
		_, err := t.c.Conn().PgConn().CopyFrom(ctx, pr, "COPY "+quote(head.Table)+" ("+quoteAll(head.Columns)+") FROM STDIN (FORMAT binary)")
		pr.CloseWithError(err) // unblocks a writer when the COPY failed early
		copied <- err
	}()
	err := func() error {
		for {
			f, err := nextBodyFrame(dec, head.Table, Postgres)
			if err != nil || f.End {
				return err
			}
			if _, err := pw.Write(f.Data); err != nil {
				return err
			}
		}
	}()
	pw.CloseWithError(err) // nil: EOF, the COPY completes
	if cerr := <-copied; err == nil && cerr != nil {
		err = fmt.Errorf("sqlstore: copy into %s: %w", head.Table, cerr)
	}
	return err
}

// restoreSQLiteTable inserts the table's Rows frames.
func restoreSQLiteTable(ctx context.Context, t *sqliteTxn, head snapFrame, dec *gob.Decoder) error {
	marks := make([]string, len(head.Columns))
	for i := range marks {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	ins, err := t.tx.PrepareContext(ctx, "INSERT INTO "+quote(head.Table)+" ("+quoteAll(head.Columns)+") VALUES ("+strings.Join(marks, ", ")+")")
	if err != nil {
		return fmt.Errorf("%w: table %s columns %v: %v", target.ErrSnapshotMismatch, head.Table, head.Columns, err)
	}
	defer ins.Close()
	for {
		f, err := nextBodyFrame(dec, head.Table, SQLite)
		if err != nil || f.End {
			return err
		}
		for _, row := range f.Rows {
			if len(row) != len(head.Columns) {
				return fmt.Errorf("%w: table %s: a row of %d values for %d columns", target.ErrSnapshotMismatch, head.Table, len(row), len(head.Columns))
			}
			if _, err := ins.ExecContext(ctx, row...); err != nil {
				return fmt.Errorf("sqlstore: insert into %s: %w", head.Table, err)
			}
		}
	}
}

// nextBodyFrame decodes the next frame of table's body: a piece of it as
// dialect d writes them (Data or Rows), or its End frame.
func nextBodyFrame(dec *gob.Decoder, table string, d Dialect) (snapFrame, error) {
	var f snapFrame
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("sqlstore: restore %s: %w", table, err)
	}
	other := f.Rows != nil // a SQLite piece
	if d == SQLite {
		other = f.Data != nil
	}
	if !f.End && (f.Table != "" || other) {
		return f, fmt.Errorf("%w: table %s: a frame of another kind inside it", target.ErrSnapshotMismatch, table)
	}
	return f, nil
}

// quoteAll quotes and joins column names.
func quoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quote(c)
	}
	return strings.Join(q, ", ")
}

// snapshotBegin reads the state row from row (the snapshot transaction's
// query of it), starts the snapshot with its State and returns the encoder
// the tables' rows go to.
func (s *Store) snapshotBegin(row interface{ Scan(...any) error }, begin func(target.State) (io.Writer, error)) (*gob.Encoder, error) {
	var r stateRow
	if err := row.Scan(&r.lsn, &r.epoch, &r.doc); err != nil {
		return nil, fmt.Errorf("sqlstore: read the state row of %s: %w", s.cfg.TargetID, err)
	}
	st, err := s.decodeRow(r)
	if err != nil {
		return nil, err
	}
	w, err := begin(st)
	if err != nil {
		return nil, err
	}
	return gob.NewEncoder(w), nil
}
