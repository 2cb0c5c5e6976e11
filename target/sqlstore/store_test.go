package sqlstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// msg is one message of a delivery.
func msg(key, value string, headers ...string) *logstorepb.Message {
	m := &logstorepb.Message{Key: []byte(key), Value: []byte(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		m.Headers = append(m.Headers, &logstorepb.Header{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return m
}

// feed builds deliveries and the State they lead to.
type feed struct {
	st target.State
}

func newFeed(epoch types.Epoch) *feed {
	return &feed{st: target.State{Epoch: epoch, Topics: map[string]types.Offset{}}}
}

// txn is the next delivery at lsn with one slice per topic (in order).
func (f *feed) txn(lsn types.LSN, slices ...any) *targetpb.Delivery {
	d := &targetpb.Delivery{Lsn: uint64(lsn)}
	for i := 0; i < len(slices); i += 2 {
		topic, ms := slices[i].(string), slices[i+1].([]*logstorepb.Message)
		d.Slices = append(d.Slices, &logstorepb.TxnSlice{Topic: topic, FirstOffset: uint64(f.st.Topics[topic]), Messages: ms})
		f.st.Topics[topic] += types.Offset(len(ms))
	}
	f.st.AppliedLSN = lsn
	return d
}

// next is the State after the deliveries built so far (a copy).
func (f *feed) next() target.State { return f.st.Clone() }

func ms(m ...*logstorepb.Message) []*logstorepb.Message { return m }

func mustApply(t *testing.T, s *sqlstore.Store, ds []*targetpb.Delivery, next target.State) {
	t.Helper()
	if err := s.Apply(ds, next); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// normJSON renders a JSON text canonically ("NULL" stays).
func normJSON(t *testing.T, s string) string {
	t.Helper()
	if s == "NULL" {
		return s
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func testApplyRestart(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"orders", "Inv.x"}})
	s := d.open("sink", m)
	f := newFeed(3)
	ds := []*targetpb.Delivery{
		f.txn(1, "orders", ms(msg("k1", `{"id": 1}`, "h", "v", "bin", "\x00\xff"), msg("", "not json"))),
		f.txn(2, "Inv.x", ms(msg("", ""))),
		{Lsn: 5}, // a progress marker
	}
	f.st.AppliedLSN = 5
	mustApply(t, s, nil, target.State{Epoch: 3, Topics: map[string]types.Offset{}})
	mustApply(t, s, ds, f.next())
	ds2 := []*targetpb.Delivery{f.txn(7, "orders", ms(msg("k3", "[1,2]")), "Inv.x", ms(msg("", "7")))}
	mustApply(t, s, ds2, f.next())

	re := d.open("sink", m)
	got, err := re.State()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f.next()) {
		t.Fatalf("State after reopen %+v, want %+v", got, f.next())
	}
	rows := d.query(`SELECT lsn, topic_offset, key, value, CAST(value_json AS text), CAST(headers AS text) FROM orders ORDER BY topic_offset`)
	want := [][]string{
		{"1", "0", "k1", `{"id": 1}`, `{"id":1}`, `[{"key":"h","value":"v"},{"key":"bin","value_b64":"AP8="}]`},
		{"1", "1", "NULL", "not json", "NULL", "NULL"},
		{"7", "2", "k3", "[1,2]", "[1,2]", "NULL"},
	}
	for _, r := range rows {
		r[4], r[5] = normJSON(t, r[4]), normJSON(t, r[5])
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("orders rows\n%q\nwant\n%q", rows, want)
	}
	rows = d.query(`SELECT lsn, topic_offset, value, CAST(value_json AS text) FROM _nv_x ORDER BY topic_offset`)
	if want := [][]string{{"2", "0", "", "NULL"}, {"7", "1", "7", "7"}}; !reflect.DeepEqual(rows, want) {
		t.Fatalf("_nv_x rows %q, want %q", rows, want)
	}
}

// Two stores for one target id on one database (two sink processes): the
// older epoch is refused and writes nothing; a store whose view of the row
// is stale (the other committed meanwhile) is refused too.
func testFencing(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}})
	a, b := d.open("sink", m), d.open("sink", m)
	mustApply(t, a, nil, target.State{Epoch: 2, Topics: map[string]types.Offset{}})

	f := newFeed(1)
	ds := []*targetpb.Delivery{f.txn(1, "t", ms(msg("", "old")))}
	err := b.Apply(ds, f.next())
	if !errors.Is(err, sqlstore.ErrFenced) || !strings.Contains(err.Error(), "epoch 2") {
		t.Fatalf("epoch 1 after epoch 2 was stored: %v, want ErrFenced naming epoch 2", err)
	}
	if n := d.query(`SELECT count(*) FROM t`); n[0][0] != "0" {
		t.Fatalf("the refused Apply wrote %s rows", n[0][0])
	}
	// Same epoch, but b has not seen a's commit.
	f = newFeed(2)
	ds = []*targetpb.Delivery{f.txn(1, "t", ms(msg("", "b")))}
	if err := b.Apply(ds, f.next()); !errors.Is(err, sqlstore.ErrFenced) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("b with a stale view: %v, want ErrFenced (another process committed)", err)
	}
	// b reloads (as the SDK does after an error) and commits; then a is stale.
	if st, err := b.State(); err != nil || st.Epoch != 2 {
		t.Fatalf("b.State: %+v %v", st, err)
	}
	mustApply(t, b, ds, f.next())
	ds2 := []*targetpb.Delivery{f.txn(2, "t", ms(msg("", "a")))}
	if err := a.Apply(ds2, f.next()); !errors.Is(err, sqlstore.ErrFenced) {
		t.Fatalf("a after b's commit: %v, want ErrFenced", err)
	}
	if rows := d.query(`SELECT lsn, value FROM t ORDER BY topic_offset`); !reflect.DeepEqual(rows, [][]string{{"1", "b"}}) {
		t.Fatalf("rows %q, want only b's", rows)
	}
}

// An Apply that fails after its rows were written (the application's hook
// errs; on PostgreSQL the server also kills the session in the middle)
// leaves the old State and no rows, and the store goes on afterwards.
func testRollback(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}})
	var fail func(ctx context.Context, tx sqlstore.Tx) error
	cfg := d.base
	cfg.TargetID = "sink"
	cfg.Setup = m.Setup
	cfg.Apply = func(ctx context.Context, tx sqlstore.Tx, ds []*targetpb.Delivery) error {
		if err := m.Apply(ctx, tx, ds); err != nil {
			return err
		}
		if fail != nil {
			return fail(ctx, tx)
		}
		return nil
	}
	s, err := sqlstore.Open(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	f := newFeed(1)
	mustApply(t, s, []*targetpb.Delivery{f.txn(1, "t", ms(msg("", "one")))}, f.next())
	before := f.next()

	fails := []func(ctx context.Context, tx sqlstore.Tx) error{
		func(context.Context, sqlstore.Tx) error { return errors.New("hook failed") },
	}
	if d.pg != nil {
		fails = append(fails, func(ctx context.Context, tx sqlstore.Tx) error {
			_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
			return err
		})
	}
	for i, fn := range fails {
		fail = fn
		g := &feed{st: before.Clone()}
		if err := s.Apply([]*targetpb.Delivery{g.txn(2, "t", ms(msg("", "two")))}, g.next()); err == nil {
			t.Fatalf("failure %d: Apply returned nil", i)
		}
		st, err := s.State()
		if err != nil || !reflect.DeepEqual(st, before) {
			t.Fatalf("failure %d: State %+v %v, want %+v", i, st, err, before)
		}
		if rows := d.query(`SELECT value FROM t ORDER BY topic_offset`); !reflect.DeepEqual(rows, [][]string{{"one"}}) {
			t.Fatalf("failure %d: rows %q, want only the first", i, rows)
		}
	}
	fail = nil
	mustApply(t, s, []*targetpb.Delivery{f.txn(2, "t", ms(msg("", "two")))}, f.next())
}

// An existing table of another shape (a column's type, its nullability, the
// primary key) is refused at Open with one line naming the table and the
// column; nothing is created or applied. A table the mapping created itself
// is accepted again.
func testSchemaRefused(t *testing.T, d db) {
	// Each case is the append table's columns with one change.
	cols := func(pg bool, change map[string]string) string {
		defs := []struct{ name, pg, lite string }{
			{"lsn", "bigint NOT NULL", "INTEGER NOT NULL"}, {"topic_offset", "bigint PRIMARY KEY", "INTEGER PRIMARY KEY"},
			{"key", "bytea", "BLOB"}, {"value", "bytea NOT NULL", "BLOB NOT NULL"}, {"value_json", "jsonb", "TEXT"},
			{"headers", "jsonb", "TEXT"}, {"applied_at", "timestamptz", "TEXT"},
		}
		var out []string
		for _, c := range defs {
			def := c.lite
			if pg {
				def = c.pg
			}
			if ch, ok := change[c.name]; ok {
				def = ch
			}
			if def != "-" {
				out = append(out, c.name+" "+def)
			}
		}
		if pk, ok := change["PRIMARY KEY"]; ok {
			out = append(out, "PRIMARY KEY ("+pk+")")
		}
		return strings.Join(out, ", ")
	}
	pg := d.pg != nil
	typ := map[bool]string{true: "bigint", false: "INTEGER"}[pg]
	byt := map[bool]string{true: "bytea", false: "BLOB"}[pg]
	for _, c := range []struct {
		name   string
		change map[string]string
		want   string
	}{
		{"type", map[string]string{"value_json": byt}, "table orders column value_json has type"},
		{"missing", map[string]string{"headers": "-"}, "table orders has no column headers"},
		{"nullable", map[string]string{"value": byt}, "table orders column value allows NULL"},
		{"not null", map[string]string{"key": byt + " NOT NULL"}, "table orders column key is NOT NULL"},
		{"other primary key", map[string]string{"topic_offset": typ + " NOT NULL", "lsn": typ + " PRIMARY KEY"}, "table orders column topic_offset is not in the primary key (lsn)"},
		{"no primary key", map[string]string{"topic_offset": typ + " NOT NULL"}, "table orders column topic_offset is not in the primary key ()"},
		{"wider primary key", map[string]string{"topic_offset": typ + " NOT NULL", "PRIMARY KEY": "topic_offset, lsn"}, "table orders column lsn is in the primary key (topic_offset,lsn)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d.query(`DROP TABLE IF EXISTS orders`)
			d.query(`CREATE TABLE orders (` + cols(pg, c.change) + `)`)
			m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"orders"}})
			_, err := d.tryOpen("sink", m)
			if !errors.Is(err, sqlstore.ErrSchema) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open over a foreign table: %v, want ErrSchema saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
	// The mapping's own tables (append, upsert, dead letter) pass the check
	// at the next Open; so does a table written out as the README says.
	d.query(`DROP TABLE orders`)
	d.query(`CREATE TABLE orders (` + cols(pg, nil) + `)`)
	for _, mc := range []sqlstore.MappingConfig{
		{Topics: []string{"orders", "t"}, OnBadMessage: sqlstore.DeadLetter},
		{Topics: []string{"kv"}, Mode: sqlstore.Upsert},
	} {
		for range 2 {
			s, err := d.tryOpen("sink", mapping(t, "sink", mc))
			if err != nil {
				t.Fatalf("Open over the mapping's own tables: %v", err)
			}
			s.Close()
		}
	}
}

func testBadMessageRefused(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}, MaxValueBytes: 4})
	s := d.open("sink", m)
	f := newFeed(1)
	ds := []*targetpb.Delivery{f.txn(1, "t", ms(msg("", "ok"))), f.txn(2, "t", ms(msg("", "too long")))}
	err := s.Apply(ds, f.next())
	var ae *target.ApplyError
	if !errors.As(err, &ae) || ae.LSN != 2 || !errors.Is(err, target.ErrPermanent) {
		t.Fatalf("Apply: %v, want a permanent refusal at lsn 2", err)
	}
	for _, want := range []string{"table t", "column value", "lsn 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not name %q", err, want)
		}
	}
	if n := d.query(`SELECT count(*) FROM t`); n[0][0] != "0" {
		t.Fatalf("a refused batch wrote %s rows", n[0][0])
	}
}

func testBadMessageDeadLetter(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}, MaxValueBytes: 4, OnBadMessage: sqlstore.DeadLetter})
	s := d.open("sink", m)
	f := newFeed(1)
	ds := []*targetpb.Delivery{f.txn(1, "t", ms(msg("", "ok"), msg("k", "too long", "h", "v"), msg("", "ok2")))}
	mustApply(t, s, ds, f.next())
	if rows := d.query(`SELECT topic_offset, value FROM t ORDER BY topic_offset`); !reflect.DeepEqual(rows, [][]string{{"0", "ok"}, {"2", "ok2"}}) {
		t.Fatalf("rows %q", rows)
	}
	rows := d.query(`SELECT target_id, lsn, topic, topic_offset, table_name, column_name, reason, key, value FROM logplayer_dead_letter`)
	want := [][]string{{"sink", "1", "t", "1", "t", "value", "value of 8 bytes, limit 4", "k", "too long"}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("dead letters %q, want %q", rows, want)
	}
}

func mutation(op shardpb.Mutation_Op, key, value string) *logstorepb.Message {
	b, err := proto.Marshal(&shardpb.Mutation{Op: op, Key: []byte(key), Value: []byte(value)})
	if err != nil {
		panic(err)
	}
	return &logstorepb.Message{Value: b}
}

func testUpsert(t *testing.T, d db) {
	m := mapping(t, "kv", sqlstore.MappingConfig{Topics: []string{"users"}, Mode: sqlstore.Upsert})
	s := d.open("kv", m)
	f := newFeed(1)
	mustApply(t, s, []*targetpb.Delivery{
		f.txn(1, "users", ms(mutation(shardpb.Mutation_PUT, "a", "1"), mutation(shardpb.Mutation_PUT, "b", `{"x":2}`))),
		f.txn(2, "users", ms(mutation(shardpb.Mutation_DELETE, "a", ""), mutation(shardpb.Mutation_PUT, "b", "3"))),
		f.txn(3, "users", ms(mutation(shardpb.Mutation_PUT, "c", "4"))),
	}, f.next())
	rows := d.query(`SELECT key, value, lsn, topic_offset FROM users ORDER BY key`)
	if want := [][]string{{"b", "3", "2", "3"}, {"c", "4", "3", "4"}}; !reflect.DeepEqual(rows, want) {
		t.Fatalf("kv rows %q, want %q", rows, want)
	}
	// A message that is not a mutation, and a key too long for the index.
	for _, bad := range []struct {
		m   *logstorepb.Message
		col string
	}{
		{&logstorepb.Message{Value: []byte("not a mutation")}, "column value"},
		{mutation(shardpb.Mutation_PUT, strings.Repeat("k", sqlstore.DefaultMaxKeyBytes+1), "v"), "column key"},
	} {
		g := &feed{st: f.next()}
		err := s.Apply([]*targetpb.Delivery{g.txn(4, "users", ms(mutation(shardpb.Mutation_PUT, "d", "5"), bad.m))}, g.next())
		if !errors.Is(err, target.ErrPermanent) || !strings.Contains(err.Error(), "table users "+bad.col) {
			t.Fatalf("bad kv message: %v, want a permanent refusal naming table users %s", err, bad.col)
		}
	}
	if n := d.query(`SELECT count(*) FROM users`); n[0][0] != "2" {
		t.Fatalf("refused batches left %s rows, want 2", n[0][0])
	}
}

// Through the target SDK: target process A serves epoch 1; process B, same
// target id, same database, accepts epoch 2. A's next batch is refused by
// the database-side check with STALE_EPOCH (fenced) on its stream, and A's
// LogPlayer's reconnect is refused the same way because A reloaded the State
// from the database.
func testFencedThroughServer(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}})
	serve := func() string {
		_, addr := targettest.Serve(t, target.Config{TargetID: "sink", Store: d.open("sink", m), Topics: []string{"t"}})
		return addr
	}
	addrA, addrB := serve(), serve()
	ctx := targettest.Context(t)
	log := targettest.NewLog()
	oldS, _, err := targettest.Open(ctx, targettest.Dial(t, addrA), targettest.Hello("sink", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oldS.Close)
	if err := oldS.Send(log.Txn(targettest.Part{Topic: "t", Values: [][]byte{[]byte("1")}})); err != nil {
		t.Fatal(err)
	}
	if err := oldS.WaitAck(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// B read the row before A's commit: storing epoch 2 over it is refused
	// (it would write B's stale applied LSN); B reloads, and the LogPlayer's
	// retry is accepted at the database's applied LSN.
	_, _, err = targettest.Open(ctx, targettest.Dial(t, addrB), targettest.Hello("sink", 2, 1))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "another process committed") {
		t.Fatalf("B's first Hello: %v, want INTERNAL (fenced: another process committed)", err)
	}
	newS, ack, err := targettest.Open(ctx, targettest.Dial(t, addrB), targettest.Hello("sink", 2, 2))
	if err != nil || ack.AppliedLsn != 1 {
		t.Fatalf("B's HelloAck %v %v, want applied lsn 1", ack, err)
	}
	t.Cleanup(newS.Close)
	late := log.Txn(targettest.Part{Topic: "t", Values: [][]byte{[]byte("late")}})
	if err := oldS.Send(late); err != nil {
		t.Fatal(err)
	}
	// The refusal on the stream where it happens is the fencing one: the
	// LogPlayer stops at once instead of reconnecting to learn it.
	if err := oldS.Wait(ctx); !target.IsFenced(err) || target.Detail(err).GetEpoch() != 2 || !strings.Contains(err.Error(), "epoch 2") {
		t.Fatalf("A's late batch: %v, want fenced (STALE_EPOCH) naming the database's epoch 2", err)
	}
	_, _, err = targettest.Open(ctx, targettest.Dial(t, addrA), targettest.Hello("sink", 1, 2))
	if !target.IsFenced(err) {
		t.Fatalf("epoch 1 reconnecting to A: %v, want fenced (STALE_EPOCH)", err)
	}
	if err := newS.Send(late); err != nil {
		t.Fatal(err)
	}
	if err := newS.WaitAck(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if rows := d.query(`SELECT lsn, value FROM t ORDER BY topic_offset`); !reflect.DeepEqual(rows, [][]string{{"1", "1"}, {"2", "late"}}) {
		t.Fatalf("rows %q, want lsn 1 and 2 once each", rows)
	}
}

// Through the target SDK, a bad message is the permanent refusal the
// LogPlayer stops on and shows (status --player): APPLY_REJECTED at its
// LSN, naming table and column; the batches before it are applied.
func testBadMessageThroughServer(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}, MaxValueBytes: 4})
	_, addr := targettest.Serve(t, target.Config{TargetID: "sink", Store: d.open("sink", m), Topics: []string{"t"}})
	ctx := targettest.Context(t)
	s, _, err := targettest.Open(ctx, targettest.Dial(t, addr), targettest.Hello("sink", 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	log := targettest.NewLog()
	if err := s.Send(log.Txn(targettest.Part{Topic: "t", Values: [][]byte{[]byte("ok")}})); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(log.Txn(targettest.Part{Topic: "t", Values: [][]byte{[]byte("too long")}})); err != nil {
		t.Fatal(err)
	}
	err = s.Wait(ctx)
	if !target.IsPermanent(err) || !strings.Contains(err.Error(), "lsn 2") || !strings.Contains(err.Error(), "table t column value") {
		t.Fatalf("stream ended with %v, want a permanent refusal at lsn 2 naming table t column value", err)
	}
	if rows := d.query(`SELECT lsn, value FROM t`); !reflect.DeepEqual(rows, [][]string{{"1", "ok"}}) {
		t.Fatalf("rows %q, want only lsn 1", rows)
	}
}

// A sink paused inside Apply while it holds the state row's lock (SIGSTOP
// mid-batch) does not block a successor for ever: PostgreSQL ends its
// session after IdleInTxTimeout, the successor (a higher epoch) commits, and
// the paused one, resumed, fails to commit: none of its rows are there.
func testPausedLockHolder(t *testing.T, d db) {
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}})
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(resume) }) }
	open := func(hook bool) *sqlstore.Store {
		cfg := d.base
		cfg.TargetID, cfg.Setup, cfg.IdleInTxTimeout, cfg.LockTimeout = "sink", m.Setup, time.Second, time.Minute
		cfg.Apply = m.Apply
		if hook {
			cfg.Apply = func(ctx context.Context, tx sqlstore.Tx, ds []*targetpb.Delivery) error {
				if err := m.Apply(ctx, tx, ds); err != nil {
					return err
				}
				close(paused)
				<-resume // silent inside the transaction, as a stopped process
				return nil
			}
		}
		s, err := sqlstore.Open(ctxT(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := open(true), open(false)
	t.Cleanup(release) // runs before the stores close: a failed test does not hang on a's connection
	fa := newFeed(1)
	errA := make(chan error, 1)
	go func() { errA <- a.Apply([]*targetpb.Delivery{fa.txn(1, "t", ms(msg("", "paused")))}, fa.next()) }()
	<-paused
	fb := newFeed(2)
	mustApply(t, b, nil, target.State{Epoch: 2, Topics: map[string]types.Offset{}}) // waits for the row's lock
	mustApply(t, b, []*targetpb.Delivery{fb.txn(1, "t", ms(msg("", "successor")))}, fb.next())
	release()
	if err := <-errA; err == nil {
		t.Fatal("the paused Apply committed after its session was ended")
	}
	if rows := d.query(`SELECT lsn, value FROM t`); !reflect.DeepEqual(rows, [][]string{{"1", "successor"}}) {
		t.Fatalf("rows %q, want only the successor's", rows)
	}
	if st, err := a.State(); err != nil || st.Epoch != 2 || st.AppliedLSN != 1 {
		t.Fatalf("the paused store reloads %+v %v, want the successor's epoch 2 lsn 1", st, err)
	}
}
