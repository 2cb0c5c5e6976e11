package sqlstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// Errors of the package. Each is wrapped with the details.
var (
	// ErrInvalidConfig: a Config or MappingConfig that cannot work.
	ErrInvalidConfig = errors.New("sqlstore: invalid config")
	// ErrUnreachable: Open could not reach the database.
	ErrUnreachable = errors.New("sqlstore: database unreachable")
	// ErrFenced: Apply found the state row changed by someone else (a higher
	// epoch, or another process's commit). Nothing was written. A higher
	// epoch also wraps target.ErrStaleEpoch: the target SDK refuses the
	// stream with STALE_EPOCH at once. Otherwise the SDK treats it as a store
	// failure (INTERNAL): it reloads State, and the LogPlayer's reconnect
	// resumes from the database's applied LSN.
	ErrFenced = errors.New("sqlstore: fenced")
	// ErrCorrupt: the state row cannot be read by this build.
	ErrCorrupt = errors.New("sqlstore: unreadable state row")
	// ErrSchema: an existing table has another shape than the one needed.
	ErrSchema = errors.New("sqlstore: table of another shape")
)

// StateTable is the table holding one row of State per target id.
const StateTable = "logplayer_target_state"

// Defaults of Config.
const (
	// DefaultTimeout bounds one Apply or State call (all its statements and
	// the commit): a database that does not answer in that time is treated
	// as lost (a transient error; the LogPlayer reconnects with backoff).
	DefaultTimeout = 30 * time.Second
	// DefaultLockTimeout bounds the wait for the state row's lock (another
	// process for the same target id holds it).
	DefaultLockTimeout = 10 * time.Second
	// DefaultIdleInTxTimeout is how long PostgreSQL keeps a transaction whose
	// client went silent (a paused or partitioned sink holding the state
	// row's lock) before it ends the session and rolls back.
	DefaultIdleInTxTimeout = 10 * time.Second
)

// ApplyFunc writes the data of ds inside tx, the transaction that also
// records the target's State. ds are as target.Store.Apply gets them
// (strictly increasing LSNs, continuity checked, progress markers without
// slices included). An error wrapping target.ErrPermanent (target.Permanent)
// refuses the delivery at its LSN for good; any other error is transient.
// Nothing it wrote survives an error.
type ApplyFunc func(ctx context.Context, tx Tx, ds []*targetpb.Delivery) error

// SetupFunc runs once at Open in its own transaction, after the state table
// exists: create the application's tables, check their shape (return an
// error wrapping ErrSchema to refuse to start).
type SetupFunc func(ctx context.Context, tx Tx) error

// Config configures a Store.
type Config struct {
	// TargetID is the target's id: the key of its row in StateTable.
	TargetID types.TargetID
	// Dialect chooses the database: Postgres (DSN) or SQLite (Path).
	Dialect Dialect
	// DSN is a PostgreSQL connection string (pgx: URL or key=value).
	DSN string
	// Path is the SQLite database file (created when missing).
	Path string
	// Apply writes the deliveries; required. Mapping.Apply is the built-in one.
	Apply ApplyFunc
	// Setup prepares the application's tables; optional.
	Setup SetupFunc
	// SnapshotTables are the tables holding the target's data, carried by
	// a snapshot (target.Snapshotter, snapshot.go; Mapping.Tables for the
	// built-in mapping). Empty: Snapshot and Restore fail.
	SnapshotTables []string
	// Timeout, LockTimeout, IdleInTxTimeout: see the Default constants.
	Timeout, LockTimeout, IdleInTxTimeout time.Duration
	// Registerer receives sqlstore_commit_duration_seconds and
	// sqlstore_batch_rows, labelled target=TargetID. Default: a private
	// registry.
	Registerer prometheus.Registerer
	// Now is the clock of the metrics; defaults to time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	switch {
	case c.TargetID == "":
		return fmt.Errorf("%w: TargetID is empty", ErrInvalidConfig)
	case c.Apply == nil:
		return fmt.Errorf("%w: Apply is nil", ErrInvalidConfig)
	case c.Dialect == Postgres && c.DSN == "":
		return fmt.Errorf("%w: DSN is empty", ErrInvalidConfig)
	case c.Dialect == SQLite && c.Path == "":
		return fmt.Errorf("%w: Path is empty", ErrInvalidConfig)
	case c.Dialect != Postgres && c.Dialect != SQLite:
		return fmt.Errorf("%w: unknown dialect %v", ErrInvalidConfig, c.Dialect)
	case c.Timeout < 0 || c.LockTimeout < 0 || c.IdleInTxTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrInvalidConfig)
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.LockTimeout = cmp.Or(c.LockTimeout, DefaultLockTimeout)
	c.IdleInTxTimeout = cmp.Or(c.IdleInTxTimeout, DefaultIdleInTxTimeout)
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Store is a target.Store whose data and State live in one SQL database.
// The target SDK calls it from one goroutine (the applier); Close may be
// called once after the SDK's Server is closed.
//
// Invariant: known is the state row as this process last read or committed
// it; Apply commits only when the row still says exactly that, so of two
// processes with the same target id at most one commits each step.
type Store struct {
	cfg   Config
	b     backend
	known target.State // applier goroutine only
	m     metrics
}

var _ target.Store = (*Store)(nil)

// Open connects, creates StateTable and the target's row when missing, runs
// cfg.Setup, and reads the State. An unreachable database is ErrUnreachable
// (naming the host or file and the cause).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var b backend
	var err error
	switch cfg.Dialect {
	case Postgres:
		b, err = openPostgres(ctx, cfg.DSN, cfg.LockTimeout, cfg.IdleInTxTimeout)
	case SQLite:
		b, err = openSQLite(ctx, cfg.Path, cfg.LockTimeout)
	}
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, b: b, m: newMetrics(cfg.Registerer, cfg.TargetID)}
	if err := s.setup(ctx); err != nil {
		b.close()
		return nil, err
	}
	if _, err := s.State(); err != nil {
		b.close()
		return nil, err
	}
	return s, nil
}

// Dialect is the database the Store writes to.
func (s *Store) Dialect() Dialect { return s.cfg.Dialect }

// Close closes the database connections.
func (s *Store) Close() { s.b.close() }

// setup creates the state table and row and runs cfg.Setup, in one
// transaction (serialised between processes: PostgreSQL's CREATE TABLE IF
// NOT EXISTS is not safe against a concurrent twin without the lock).
func (s *Store) setup(ctx context.Context) error {
	return s.inTx(ctx, func(tx txn) error {
		if s.cfg.Dialect == Postgres {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7433025)"); err != nil {
				return err
			}
		}
		t := typesOf(s.cfg.Dialect)
		ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	target_id text PRIMARY KEY,
	applied_lsn %[2]s NOT NULL,
	epoch %[2]s NOT NULL,
	state %[3]s NOT NULL,
	updated_at %[4]s NOT NULL)`, quote(StateTable), t.int, t.json, t.time)
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("sqlstore: create %s: %w", StateTable, err)
		}
		lsn, epoch, doc, err := encodeState(target.State{})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+quote(StateTable)+
			" (target_id, applied_lsn, epoch, state, updated_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (target_id) DO NOTHING",
			string(s.cfg.TargetID), lsn, epoch, doc, s.cfg.Now().UTC()); err != nil {
			return fmt.Errorf("sqlstore: insert the state row: %w", err)
		}
		if s.cfg.Setup != nil {
			return s.cfg.Setup(ctx, tx)
		}
		return nil
	})
}

// inTx runs fn in a transaction and commits it.
func (s *Store) inTx(ctx context.Context, fn func(tx txn) error) error {
	tx, err := s.b.begin(ctx, "", nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		rollback(tx)
		return err
	}
	if err := tx.commit(ctx, ""); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}

// rollback ends tx with its own deadline: the Apply's may have expired.
func rollback(tx txn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx.rollback(ctx)
}

// State reads the target's row (target.Store): what a restart would find.
func (s *Store) State() (target.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	var r stateRow
	tx, err := s.b.begin(ctx, s.stateQuery(false), []any{string(s.cfg.TargetID)}, &r.lsn, &r.epoch, &r.doc)
	if err != nil {
		return target.State{}, fmt.Errorf("sqlstore: read the state row of %s: %w", s.cfg.TargetID, err)
	}
	rollback(tx) // read only
	st, err := s.decodeRow(r)
	if err != nil {
		return target.State{}, err
	}
	s.known = st.Clone()
	return st, nil
}

// stateRow is the target's row as read.
type stateRow struct {
	lsn, epoch int64
	doc        string
}

// stateQuery reads the target's row ($1: the target id), locking it for the
// transaction when forUpdate (SQLite: the BEGIN IMMEDIATE transaction holds
// the write lock already).
func (s *Store) stateQuery(forUpdate bool) string {
	q := "SELECT applied_lsn, epoch, CAST(state AS text) FROM " + quote(StateTable) + " WHERE target_id = $1"
	if forUpdate && s.cfg.Dialect == Postgres {
		q += " FOR UPDATE"
	}
	return q
}

func (s *Store) decodeRow(r stateRow) (target.State, error) {
	st, err := decodeState(r.lsn, r.epoch, r.doc)
	if err != nil {
		return target.State{}, fmt.Errorf("%w: target %s: %v", ErrCorrupt, s.cfg.TargetID, err)
	}
	return st, nil
}

// Apply (target.Store) locks the target's row, checks that nobody else moved
// it (ErrFenced), lets cfg.Apply write ds, writes next into the row, and
// commits: all in one SQL transaction. On PostgreSQL BEGIN rides with the
// row's lock and the row's update with COMMIT, so the SQL costs the round
// trips of the bare loader (BEGIN, COPY, COMMIT).
func (s *Store) Apply(ds []*targetpb.Delivery, next target.State) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	lsn, epoch, doc, err := encodeState(next)
	if err != nil {
		return err
	}
	var r stateRow
	tx, err := s.b.begin(ctx, s.stateQuery(true), []any{string(s.cfg.TargetID)}, &r.lsn, &r.epoch, &r.doc)
	if err != nil {
		return fmt.Errorf("sqlstore: begin and lock the state row of %s: %w", s.cfg.TargetID, err)
	}
	cur, err := s.decodeRow(r)
	if err == nil {
		err = s.checkFence(cur, next)
	}
	if err == nil && len(ds) > 0 {
		err = s.cfg.Apply(ctx, tx, ds)
	}
	if err != nil {
		rollback(tx)
		return err
	}
	start := s.cfg.Now()
	if err := tx.commit(ctx, "UPDATE "+quote(StateTable)+
		" SET applied_lsn = $2, epoch = $3, state = $4, updated_at = $5 WHERE target_id = $1",
		string(s.cfg.TargetID), lsn, epoch, doc, s.cfg.Now().UTC()); err != nil {
		// Maybe committed (the connection broke after the server's commit):
		// the SDK reloads State, which reads what is really there.
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	s.m.commit.Observe(s.cfg.Now().Sub(start).Seconds())
	s.m.rows.Observe(float64(tx.rows()))
	s.known = next.Clone()
	return nil
}

// checkFence refuses when the row is not what this process last saw: a
// higher epoch stored by a newer LogPlayer's stream (through any process),
// or another process's commit for the same target id.
func (s *Store) checkFence(cur, next target.State) error {
	if cur.Epoch > next.Epoch {
		return target.StaleEpoch(cur.Epoch, fmt.Errorf("%w: the database holds epoch %d for target %s, above this stream's epoch %d",
			ErrFenced, cur.Epoch, s.cfg.TargetID, next.Epoch))
	}
	if cur.AppliedLSN != s.known.AppliedLSN || cur.Epoch != s.known.Epoch {
		return fmt.Errorf("%w: another process committed for target %s (database: applied lsn %d epoch %d; this process last saw lsn %d epoch %d)",
			ErrFenced, s.cfg.TargetID, cur.AppliedLSN, cur.Epoch, s.known.AppliedLSN, s.known.Epoch)
	}
	return nil
}

// encodeState and decodeState are the one place State meets the database.
// The whole State is the JSON document in column state, so a field added to
// target.State is persisted with no change here; applied_lsn and epoch are
// also columns of their own, for the fencing check and for people reading
// the table.
func encodeState(st target.State) (lsn, epoch int64, doc string, err error) {
	if uint64(st.AppliedLSN) > math.MaxInt64 || uint64(st.Epoch) > math.MaxInt64 {
		return 0, 0, "", fmt.Errorf("sqlstore: lsn %d or epoch %d above the bigint range", st.AppliedLSN, st.Epoch)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return 0, 0, "", fmt.Errorf("sqlstore: encode state: %w", err)
	}
	return int64(st.AppliedLSN), int64(st.Epoch), string(b), nil
}

func decodeState(lsn, epoch int64, doc string) (target.State, error) {
	var st target.State
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.DisallowUnknownFields() // written by a newer build: do not drop what it knows
	if err := dec.Decode(&st); err != nil {
		return target.State{}, fmt.Errorf("state %q: %v", doc, err)
	}
	if int64(st.AppliedLSN) != lsn || int64(st.Epoch) != epoch {
		return target.State{}, fmt.Errorf("columns applied_lsn %d epoch %d disagree with state %q", lsn, epoch, doc)
	}
	return st.Clone(), nil
}

// sqlTypes are a dialect's column types for the mappings.
type sqlTypes struct{ int, bytes, json, time string }

func typesOf(d Dialect) sqlTypes {
	if d == SQLite {
		return sqlTypes{int: "INTEGER", bytes: "BLOB", json: "TEXT", time: "TEXT"}
	}
	return sqlTypes{int: "bigint", bytes: "bytea", json: "jsonb", time: "timestamptz"}
}

type metrics struct {
	commit prometheus.Observer
	rows   prometheus.Observer
}

func newMetrics(reg prometheus.Registerer, id types.TargetID) metrics {
	labels := prometheus.Labels{"target": string(id)}
	commit := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "sqlstore_commit_duration_seconds",
		Help:        "Time of the state row's update and the SQL COMMIT of one applied batch (one round trip on PostgreSQL).",
		ConstLabels: labels,
		Buckets:     prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	rows := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "sqlstore_batch_rows",
		Help:        "Rows written (inserted, updated or deleted) by one applied batch, the state row not counted.",
		ConstLabels: labels,
		Buckets:     prometheus.ExponentialBuckets(1, 4, 10),
	})
	return metrics{commit: register(reg, commit), rows: register(reg, rows)}
}

// register registers h, or returns the twin already registered (a second
// Store for the same target in one registry).
func register(reg prometheus.Registerer, h prometheus.Histogram) prometheus.Observer {
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector.(prometheus.Histogram)
		}
		panic(err) // an invalid metric definition is a bug
	}
	return h
}
