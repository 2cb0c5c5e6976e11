package sqlstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/shard/mutation"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// DeadLetterTable holds the messages the Mapping could not store when
// OnBadMessage is DeadLetter.
const DeadLetterTable = "logplayer_dead_letter"

// Mode is how the Mapping stores a topic's messages.
type Mode int

// The modes.
const (
	// Append keeps every message as one row keyed by its topic offset.
	Append Mode = iota + 1
	// Upsert applies the messages of a kv-schema topic (shardpb.Mutation,
	// decoded by shard/mutation.Decode) to a key/value table: PUT inserts or
	// replaces the key's row, DELETE removes it (the shard's semantics).
	Upsert
)

// ModeNamed is the Mode of a name (`logplayer sink --mode`): Upsert for
// "upsert", Append for any other.
func ModeNamed(name string) Mode {
	if name == "upsert" {
		return Upsert
	}
	return Append
}

// BadMessage is what the Mapping does with a message it cannot store.
type BadMessage int

// The choices.
const (
	// Refuse refuses the message's delivery permanently (target.Permanent):
	// the LogPlayer stops delivering to this target and shows the LSN.
	Refuse BadMessage = iota + 1
	// DeadLetter writes the message and the reason into DeadLetterTable in
	// the same transaction and goes on.
	DeadLetter
)

// BadMessageNamed is the BadMessage of a name (`logplayer sink
// --on-bad-message`): DeadLetter for "dead-letter", Refuse for any other.
func BadMessageNamed(name string) BadMessage {
	if name == "dead-letter" {
		return DeadLetter
	}
	return Refuse
}

// DefaultMaxKeyBytes bounds an Upsert key: PostgreSQL's B-tree index entry
// (the primary key) holds at most about 2.7 KB, so a longer key could not
// be stored.
const DefaultMaxKeyBytes = 2048

// maxIdentifier is PostgreSQL's identifier length (NAMEDATALEN-1).
const maxIdentifier = 63

// MappingConfig configures the built-in mapping.
type MappingConfig struct {
	// TargetID names the target in dead-letter rows. Required.
	TargetID types.TargetID
	// Topics are the topics stored, one table each. Required.
	Topics []string
	// TablePrefix is put before every table name ([a-z0-9_]*).
	TablePrefix string
	// Mode defaults to Append; OnBadMessage defaults to Refuse.
	Mode         Mode
	OnBadMessage BadMessage
	// MaxKeyBytes bounds a key (default DefaultMaxKeyBytes in Upsert mode,
	// no bound in Append mode); MaxValueBytes bounds a value (default: no
	// bound below the database's own). Longer is a bad message.
	MaxKeyBytes, MaxValueBytes int
	// Now stamps applied_at; defaults to time.Now.
	Now func() time.Time
}

// Mapping is the built-in mapping: one table per topic. Append tables:
//
//	lsn bigint NOT NULL, topic_offset bigint PRIMARY KEY, key bytea,
//	value bytea NOT NULL, value_json jsonb, headers jsonb, applied_at timestamptz
//
// Upsert tables:
//
//	key bytea PRIMARY KEY, value bytea NOT NULL, value_json jsonb,
//	lsn bigint NOT NULL, topic_offset bigint NOT NULL, applied_at timestamptz
//
// (SQLite: INTEGER, BLOB, TEXT for json and time). value_json is the value
// parsed as JSON, NULL when it is not JSON; headers is a JSON array of
// {"key": …, "value": …}, with "key_b64"/"value_b64" (base64) instead when
// the bytes are not UTF-8 text; NULL when there are none.
type Mapping struct {
	cfg    MappingConfig
	tables map[string]string // topic → table
}

// NewMapping validates cfg and names the tables.
func NewMapping(cfg MappingConfig) (*Mapping, error) {
	if cfg.TargetID == "" || len(cfg.Topics) == 0 {
		return nil, fmt.Errorf("%w: mapping needs a target id and topics", ErrInvalidConfig)
	}
	if TableName("", cfg.TablePrefix) != cfg.TablePrefix {
		return nil, fmt.Errorf("%w: table prefix %q: only a-z, 0-9 and _ are allowed", ErrInvalidConfig, cfg.TablePrefix)
	}
	if cfg.Mode == 0 {
		cfg.Mode = Append
	}
	if cfg.OnBadMessage == 0 {
		cfg.OnBadMessage = Refuse
	}
	if cfg.Mode == Upsert && cfg.MaxKeyBytes == 0 {
		cfg.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if cfg.MaxKeyBytes < 0 || cfg.MaxValueBytes < 0 {
		return nil, fmt.Errorf("%w: negative size bound", ErrInvalidConfig)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Mapping{cfg: cfg, tables: map[string]string{}}
	byTable := map[string]string{}
	for _, topic := range cfg.Topics {
		name := TableName(topic, cfg.TablePrefix)
		switch {
		case topic == "" || m.tables[topic] != "":
			return nil, fmt.Errorf("%w: empty or repeated topic %q", ErrInvalidConfig, topic)
		case byTable[name] != "":
			return nil, fmt.Errorf("%w: topics %q and %q both map to table %q", ErrInvalidConfig, byTable[name], topic, name)
		case name == StateTable || name == DeadLetterTable:
			return nil, fmt.Errorf("%w: topic %q maps to the reserved table %q", ErrInvalidConfig, topic, name)
		case len(name) > maxIdentifier:
			return nil, fmt.Errorf("%w: table %q for topic %q is longer than %d bytes", ErrInvalidConfig, name, topic, maxIdentifier)
		}
		m.tables[topic] = name
		byTable[name] = topic
	}
	return m, nil
}

// TableName is the table of topic: prefix + topic with every character
// outside [a-z0-9_] replaced by "_".
func TableName(topic, prefix string) string {
	var b strings.Builder
	for _, r := range prefix + topic {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Table returns topic's table ("" for a topic not mapped).
func (m *Mapping) Table(topic string) string { return m.tables[topic] }

// column is one column of a mapped table.
type column struct {
	name string
	kind func(sqlTypes) string
	def  string // the rest of its definition
}

func colInt(t sqlTypes) string   { return t.int }
func colBytes(t sqlTypes) string { return t.bytes }
func colJSON(t sqlTypes) string  { return t.json }
func colTime(t sqlTypes) string  { return t.time }
func colText(sqlTypes) string    { return "text" }

var (
	appendColumns = []column{
		{"lsn", colInt, "NOT NULL"}, {"topic_offset", colInt, "PRIMARY KEY"}, {"key", colBytes, ""},
		{"value", colBytes, "NOT NULL"}, {"value_json", colJSON, ""}, {"headers", colJSON, ""},
		{"applied_at", colTime, ""},
	}
	upsertColumns = []column{
		{"key", colBytes, "PRIMARY KEY"}, {"value", colBytes, "NOT NULL"}, {"value_json", colJSON, ""},
		{"lsn", colInt, "NOT NULL"}, {"topic_offset", colInt, "NOT NULL"}, {"applied_at", colTime, ""},
	}
	// deadLetterKey is the dead-letter table's primary key.
	deadLetterKey     = []string{"target_id", "topic", "topic_offset"}
	deadLetterColumns = []column{
		{"target_id", colText, "NOT NULL"}, {"lsn", colInt, "NOT NULL"}, {"topic", colText, "NOT NULL"},
		{"topic_offset", colInt, "NOT NULL"}, {"table_name", colText, "NOT NULL"}, {"column_name", colText, "NOT NULL"},
		{"reason", colText, "NOT NULL"}, {"key", colBytes, ""}, {"value", colBytes, "NOT NULL"},
		{"headers", colJSON, ""}, {"recorded_at", colTime, "NOT NULL"},
	}
)

// names are the column names of cols.
func names(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// Setup (a SetupFunc) creates the missing tables and refuses an existing
// one of another shape: a column missing, of another type or nullability,
// or another primary key (ErrSchema, naming the table and the column).
func (m *Mapping) Setup(ctx context.Context, tx Tx) error {
	cols := appendColumns
	if m.cfg.Mode == Upsert {
		cols = upsertColumns
	}
	for _, topic := range m.cfg.Topics {
		if err := ensureTable(ctx, tx, m.tables[topic], cols, nil); err != nil {
			return err
		}
	}
	if m.cfg.OnBadMessage == DeadLetter {
		return ensureTable(ctx, tx, DeadLetterTable, deadLetterColumns, deadLetterKey)
	}
	return nil
}

// ensureTable creates table or checks the shape of the one there: each
// column's type and nullability, and the primary key. The primary key is
// key when set (a table constraint), else the columns defined PRIMARY KEY.
func ensureTable(ctx context.Context, tx Tx, table string, cols []column, key []string) error {
	t := typesOf(tx.Dialect())
	exists, err := tableExists(ctx, tx, table)
	if err != nil {
		return err
	}
	if !exists {
		defs := make([]string, len(cols))
		for i, c := range cols {
			defs[i] = strings.TrimSpace(quote(c.name) + " " + c.kind(t) + " " + c.def)
		}
		if key != nil {
			quoted := make([]string, len(key))
			for i, k := range key {
				quoted[i] = quote(k)
			}
			defs = append(defs, "PRIMARY KEY ("+strings.Join(quoted, ", ")+")")
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+quote(table)+" ("+strings.Join(defs, ", ")+")"); err != nil {
			return fmt.Errorf("sqlstore: create table %s: %w", table, err)
		}
		return nil
	}
	if key == nil {
		for _, c := range cols {
			if strings.Contains(c.def, "PRIMARY KEY") {
				key = append(key, c.name)
			}
		}
	}
	for _, c := range cols {
		got, err := columnOf(ctx, tx, table, c.name)
		if err != nil {
			return err
		}
		want := c.kind(t)
		wantNotNull := strings.Contains(c.def, "NOT NULL") || slices.Contains(key, c.name)
		switch {
		case got.typ == "":
			return fmt.Errorf("%w: table %s has no column %s (want %s); nothing applied", ErrSchema, table, c.name, want)
		case !sameType(tx.Dialect(), got.typ, want):
			return fmt.Errorf("%w: table %s column %s has type %s, want %s; nothing applied", ErrSchema, table, c.name, got.typ, want)
		case wantNotNull && !got.notNull:
			return fmt.Errorf("%w: table %s column %s allows NULL, want NOT NULL; nothing applied", ErrSchema, table, c.name)
		case !wantNotNull && got.notNull:
			return fmt.Errorf("%w: table %s column %s is NOT NULL, want NULL allowed (a message may have none); nothing applied", ErrSchema, table, c.name)
		}
	}
	gotKey, err := primaryKey(ctx, tx, table)
	if err != nil {
		return err
	}
	for _, k := range key {
		if !slices.Contains(gotKey, k) {
			return fmt.Errorf("%w: table %s column %s is not in the primary key (%s), want primary key (%s); nothing applied",
				ErrSchema, table, k, strings.Join(gotKey, ","), strings.Join(key, ","))
		}
	}
	for _, k := range gotKey {
		if !slices.Contains(key, k) {
			return fmt.Errorf("%w: table %s column %s is in the primary key (%s), want primary key (%s); nothing applied",
				ErrSchema, table, k, strings.Join(gotKey, ","), strings.Join(key, ","))
		}
	}
	return nil
}

func tableExists(ctx context.Context, tx Tx, table string) (bool, error) {
	q := "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
	if tx.Dialect() == SQLite {
		q = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1"
	}
	var n int64
	if err := tx.QueryRow(ctx, q, table).Scan(&n); err != nil {
		return false, fmt.Errorf("sqlstore: look up table %s: %w", table, err)
	}
	return n > 0, nil
}

// columnInfo is a column as the catalog describes it.
type columnInfo struct {
	typ     string // as the catalog spells it; "" when there is no such column
	notNull bool   // NULL refused (SQLite: NOT NULL, or in the primary key)
}

// columnOf reads table.col from the catalog. SQLite does not refuse NULL in
// a primary key column of a type other than INTEGER unless it is declared
// NOT NULL, but the mapping never writes NULL there: a primary key column
// counts as NOT NULL.
func columnOf(ctx context.Context, tx Tx, table, col string) (columnInfo, error) {
	q := "SELECT count(*), coalesce(max(data_type), ''), coalesce(bool_or(is_nullable = 'NO'), false) FROM information_schema.columns " +
		"WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2"
	if tx.Dialect() == SQLite {
		q = `SELECT count(*), coalesce(max(type), ''), coalesce(max("notnull" != 0 OR pk > 0), 0) FROM pragma_table_info($1) WHERE name = $2`
	}
	var n int64
	var c columnInfo
	if err := tx.QueryRow(ctx, q, table, col).Scan(&n, &c.typ, &c.notNull); err != nil {
		return columnInfo{}, fmt.Errorf("sqlstore: look up column %s.%s: %w", table, col, err)
	}
	return c, nil
}

// primaryKey is the columns of table's primary key, in key order (none:
// empty).
func primaryKey(ctx context.Context, tx Tx, table string) ([]string, error) {
	q := "SELECT coalesce(string_agg(k.column_name, ',' ORDER BY k.ordinal_position), '') " +
		"FROM information_schema.table_constraints c JOIN information_schema.key_column_usage k " +
		"ON k.constraint_schema = c.constraint_schema AND k.constraint_name = c.constraint_name " +
		"WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() AND c.table_name = $1"
	if tx.Dialect() == SQLite {
		q = "SELECT coalesce(group_concat(name, ','), '') FROM (SELECT name FROM pragma_table_info($1) WHERE pk > 0 ORDER BY pk)"
	}
	var key string
	if err := tx.QueryRow(ctx, q, table).Scan(&key); err != nil {
		return nil, fmt.Errorf("sqlstore: look up the primary key of %s: %w", table, err)
	}
	if key == "" {
		return nil, nil
	}
	return strings.Split(key, ","), nil
}

// sameType compares a catalog type with the one the mapping creates.
func sameType(d Dialect, got, want string) bool {
	if d == Postgres && want == "timestamptz" {
		want = "timestamp with time zone" // information_schema's spelling
	}
	return strings.EqualFold(got, want)
}

// BadMessageError says why one message cannot go into its table.
type BadMessageError struct {
	Table, Column string
	LSN           types.LSN
	Topic         string
	Offset        types.Offset
	Reason        string
}

func (e *BadMessageError) Error() string {
	return fmt.Sprintf("table %s column %s cannot take the message at lsn %d (topic %s offset %d): %s",
		e.Table, e.Column, e.LSN, e.Topic, e.Offset, e.Reason)
}

// Apply (an ApplyFunc) stores ds: appends with one CopyFrom per table,
// upserts and deletes in log order. A bad message is refused (Refuse) or
// dead-lettered (DeadLetter); it is checked before anything is written.
func (m *Mapping) Apply(ctx context.Context, tx Tx, ds []*targetpb.Delivery) error {
	now := m.cfg.Now().UTC()
	rows := map[string][][]any{} // append: table → rows, in log order
	var order []string           // tables in first-seen order, for a stable COPY order
	for _, d := range ds {
		lsn := types.LSN(d.Lsn)
		for _, sl := range d.Slices {
			table := m.tables[sl.Topic]
			if table == "" {
				return target.Permanent(lsn, fmt.Errorf("topic %q has no table (not in the mapping's topics)", sl.Topic))
			}
			for i, msg := range sl.Messages {
				off := types.Offset(sl.FirstOffset + uint64(i))
				if uint64(lsn) > math.MaxInt64 || uint64(off) > math.MaxInt64 {
					return target.Permanent(lsn, fmt.Errorf("lsn %d or offset %d above the bigint range", lsn, off))
				}
				var row []any
				var bad *BadMessageError
				if m.cfg.Mode == Upsert {
					var err error
					if bad, err = m.upsert(ctx, tx, table, lsn, off, msg, now); err != nil {
						return err
					}
				} else if row, bad = m.appendRow(table, lsn, off, msg, now); bad == nil {
					if rows[table] == nil {
						order = append(order, table)
					}
					rows[table] = append(rows[table], row)
				}
				if bad != nil {
					bad.Topic = sl.Topic
					if err := m.badMessage(ctx, tx, bad, msg, now); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, table := range order {
		if _, err := tx.CopyFrom(ctx, table, names(appendColumns), rows[table]); err != nil {
			return fmt.Errorf("sqlstore: copy into %s: %w", table, err)
		}
	}
	return nil
}

// appendRow is msg's row of an Append table, or why it cannot be one.
func (m *Mapping) appendRow(table string, lsn types.LSN, off types.Offset, msg *logstorepb.Message, now time.Time) ([]any, *BadMessageError) {
	bad := func(col, why string) *BadMessageError {
		return &BadMessageError{Table: table, Column: col, LSN: lsn, Offset: off, Reason: why}
	}
	if n := m.cfg.MaxKeyBytes; n > 0 && len(msg.Key) > n {
		return nil, bad("key", fmt.Sprintf("key of %d bytes, limit %d", len(msg.Key), n))
	}
	if n := m.cfg.MaxValueBytes; n > 0 && len(msg.Value) > n {
		return nil, bad("value", fmt.Sprintf("value of %d bytes, limit %d", len(msg.Value), n))
	}
	return []any{int64(lsn), int64(off), nullBytes(msg.Key), notNull(msg.Value), jsonValue(msg.Value), headersJSON(msg.Headers), now}, nil
}

// upsert applies one kv message, or returns why it is bad; err is a
// database error.
func (m *Mapping) upsert(ctx context.Context, tx Tx, table string, lsn types.LSN, off types.Offset, msg *logstorepb.Message, now time.Time) (*BadMessageError, error) {
	bad := func(col, why string) *BadMessageError {
		return &BadMessageError{Table: table, Column: col, LSN: lsn, Offset: off, Reason: why}
	}
	mu, err := mutation.Decode(msg.Value)
	if err != nil {
		return bad("value", err.Error()), nil
	}
	if n := m.cfg.MaxKeyBytes; n > 0 && len(mu.Key) > n {
		return bad("key", fmt.Sprintf("key of %d bytes, limit %d", len(mu.Key), n)), nil
	}
	if n := m.cfg.MaxValueBytes; n > 0 && len(mu.Value) > n {
		return bad("value", fmt.Sprintf("value of %d bytes, limit %d", len(mu.Value), n)), nil
	}
	if mu.Op == shardpb.Mutation_DELETE {
		_, err = tx.Exec(ctx, "DELETE FROM "+quote(table)+" WHERE key = $1", mu.Key)
	} else {
		_, err = tx.Exec(ctx, "INSERT INTO "+quote(table)+" (key, value, value_json, lsn, topic_offset, applied_at) "+
			"VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO UPDATE SET value = excluded.value, "+
			"value_json = excluded.value_json, lsn = excluded.lsn, topic_offset = excluded.topic_offset, applied_at = excluded.applied_at",
			mu.Key, notNull(mu.Value), jsonValue(mu.Value), int64(lsn), int64(off), now)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: upsert into %s at lsn %d: %w", table, lsn, err)
	}
	return nil, nil
}

// badMessage refuses bad for good, or writes it into DeadLetterTable.
func (m *Mapping) badMessage(ctx context.Context, tx Tx, bad *BadMessageError, msg *logstorepb.Message, now time.Time) error {
	if m.cfg.OnBadMessage != DeadLetter {
		return target.Permanent(bad.LSN, bad)
	}
	row := []any{string(m.cfg.TargetID), int64(bad.LSN), bad.Topic, int64(bad.Offset), bad.Table, bad.Column,
		bad.Reason, nullBytes(msg.Key), notNull(msg.Value), headersJSON(msg.Headers), now}
	if _, err := tx.CopyFrom(ctx, DeadLetterTable, names(deadLetterColumns), [][]any{row}); err != nil {
		return fmt.Errorf("sqlstore: dead-letter lsn %d: %w", bad.LSN, err)
	}
	return nil
}

// nullBytes is NULL for an empty key.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// notNull keeps an empty value an empty value (a nil slice would be NULL).
func notNull(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// jsonValue is v as JSON text when it is a JSON document PostgreSQL's jsonb
// accepts (valid UTF-8, no \u0000), else nil (NULL).
func jsonValue(v []byte) any {
	if len(v) == 0 || !utf8.Valid(v) || !json.Valid(v) || bytes.Contains(v, []byte(`\u0000`)) {
		return nil
	}
	return string(v)
}

// textual says whether b can be a JSON string in a jsonb document.
func textual(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

// headersJSON encodes headers losslessly (see Mapping), NULL when none.
func headersJSON(hs []*logstorepb.Header) any {
	if len(hs) == 0 {
		return nil
	}
	out := make([]map[string]string, len(hs))
	for i, h := range hs {
		e := map[string]string{}
		if textual([]byte(h.Key)) {
			e["key"] = h.Key
		} else {
			e["key_b64"] = base64.StdEncoding.EncodeToString([]byte(h.Key))
		}
		if textual(h.Value) {
			e["value"] = string(h.Value)
		} else {
			e["value_b64"] = base64.StdEncoding.EncodeToString(h.Value)
		}
		out[i] = e
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(fmt.Sprintf("sqlstore: encode headers: %v", err)) // strings only: cannot fail
	}
	return string(b)
}

// OpenMapped opens a Store that applies through the mapping of mc: cfg's
// Apply, Setup and SnapshotTables are the mapping's. An invalid mc or cfg
// is an error wrapping ErrInvalidConfig.
func OpenMapped(ctx context.Context, mc MappingConfig, cfg Config) (*Store, error) {
	m, err := NewMapping(mc)
	if err != nil {
		return nil, err
	}
	cfg.Apply, cfg.Setup, cfg.SnapshotTables = m.Apply, m.Setup, m.Tables()
	return Open(ctx, cfg)
}

// OpenMappedState is OpenMapped followed by the store's State, what a
// sink starts serving from; on an error of State the store is closed.
func OpenMappedState(ctx context.Context, mc MappingConfig, cfg Config) (*Store, target.State, error) {
	s, err := OpenMapped(ctx, mc, cfg)
	if err != nil {
		return nil, target.State{}, err
	}
	st, err := s.State()
	if err != nil {
		s.Close()
		return nil, target.State{}, err
	}
	return s, st, nil
}
