// Package sqlstore is a target.Store over a SQL database — PostgreSQL (pgx)
// or SQLite (modernc.org/sqlite, pure Go) — so that a database is fed from
// the log exactly once: the target's State lives in the same database as the
// data, written in the same SQL transaction (as PostgreSQL's logical
// replication keeps its replication origin).
//
// # State and fencing
//
// StateTable (logplayer_target_state) holds one row per target id: the
// applied LSN, the highest LogPlayer epoch, and the whole target.State as a
// JSON document (encodeState/decodeState are the one place it is mapped).
// Every Apply, in one transaction:
//
//  1. re-reads the row with SELECT … FOR UPDATE (SQLite: every transaction
//     is BEGIN IMMEDIATE, so it holds the write lock from its first read);
//  2. refuses with ErrFenced, writing nothing, when the stored epoch is above
//     the stream's (a newer LogPlayer took over, possibly through another
//     sink process) or when the row is not what this process last read or
//     wrote (another process for the same target id committed meanwhile);
//  3. calls the application's ApplyFunc with the open transaction;
//  4. writes the new State into the row and commits.
//
// So two sink processes for one target id can never both commit a batch,
// whatever their pauses: a SIGSTOPped process resumed after a takeover finds
// the row moved and is refused. A refusal for a higher epoch wraps
// target.ErrStaleEpoch: the target SDK ends the stream with STALE_EPOCH
// (target.IsFenced), so the old LogPlayer stops on the stream where it
// happens, and reloads State from the row, so its reconnect is refused the
// same way. A refusal because another process committed at the same epoch
// ends the stream as a store failure (INTERNAL): the SDK reloads State and
// the LogPlayer's reconnect resumes from the row's applied LSN. A process holding the row's lock while paused does not
// block its successor for ever: PostgreSQL ends a session idle in a
// transaction after Config.IdleInTxTimeout, and a lock wait gives up after
// Config.LockTimeout (a transient error, retried).
//
// Any database error (connection lost, timeout, commit failed) is transient:
// nothing of the batch is visible, the SDK reloads State and the LogPlayer
// reconnects with backoff; when the database is back delivery resumes from
// the applied LSN in the row. A commit whose answer was lost is resolved by
// that reload (the row says whether it committed).
//
// # The built-in mapping
//
// Mapping (what `logplayer sink postgres|sqlite` runs) writes one table per
// topic, created when missing; an existing table of another shape (a column
// missing, of another type or nullability, another primary key) is refused
// at Open with ErrSchema naming the table and the column. Append mode keeps
// every message (COPY, one row per message, topic_offset the primary key);
// Upsert mode applies the put/delete mutations of a kv-schema topic to a
// key/value table. A message that cannot go into its table (longer than a
// column bound, not a mutation in Upsert mode, an Upsert key over
// DefaultMaxKeyBytes) is a BadMessageError naming table, column and LSN: a
// permanent refusal (target.Permanent), or with DeadLetter a row in
// DeadLetterTable written in the same transaction.
//
// # An application schema
//
// An application with its own tables gives Config its own ApplyFunc (and a
// SetupFunc to create the tables); it runs inside the transaction that
// records the State, so its writes are exactly once too:
//
//	setup := func(ctx context.Context, tx sqlstore.Tx) error {
//		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS balances (
//			account text PRIMARY KEY, cents bigint NOT NULL)`)
//		return err
//	}
//	apply := func(ctx context.Context, tx sqlstore.Tx, ds []*targetpb.Delivery) error {
//		for _, d := range ds {
//			for _, sl := range d.Slices {
//				for _, m := range sl.Messages {
//					var e struct{ Account string; Cents int64 }
//					if err := json.Unmarshal(m.Value, &e); err != nil {
//						return target.Permanent(types.LSN(d.Lsn), err) // never retried
//					}
//					if _, err := tx.Exec(ctx, `INSERT INTO balances VALUES ($1, $2)
//						ON CONFLICT (account) DO UPDATE SET cents = balances.cents + excluded.cents`,
//						e.Account, e.Cents); err != nil {
//						return err // transient: rolled back, redelivered
//					}
//				}
//			}
//		}
//		return nil
//	}
//	store, err := sqlstore.Open(ctx, sqlstore.Config{TargetID: "balances",
//		Dialect: sqlstore.Postgres, DSN: dsn, Setup: setup, Apply: apply})
//	srv, err := target.NewServer(target.Config{TargetID: "balances", Store: store, Topics: []string{"payments"}})
//
// The increment above is safe only because the State commits with it: a
// redelivery after a crash finds the applied LSN moved and is never applied
// twice.
//
// # Snapshot and restore
//
// Store implements target.Snapshotter (snapshot.go) over the tables named
// by Config.SnapshotTables (Mapping.Tables): a snapshot is one read
// transaction's rows and State, a restore one SQL transaction into an
// empty target, so `logplayer target clone` can seed a new sink from a
// sibling after retention trimmed the log.
//
// # Goroutines
//
// None of its own. The target SDK's applier goroutine is the only caller of
// State and Apply; pgxpool runs its health-check goroutine.
package sqlstore
