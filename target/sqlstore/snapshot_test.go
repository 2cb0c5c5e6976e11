package sqlstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/logplayer/logplayer/internal/pgtest"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/sqlstore"
	"github.com/logplayer/logplayer/types"
)

// TestSnapshotRestore (issue #29) runs on both databases: a snapshot of a
// sink restored into an empty sink of another database gives the same
// rows (applied_at included) and State; a restore whose stream breaks
// half-way leaves the new sink empty (its one transaction rolls back) and
// the rerun succeeds; a second restore is refused (ErrNotEmpty); the tail
// then applies to both alike.
func TestSnapshotRestore(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { testSnapshotRestore(t, &env{name: "postgres", pg: pgtest.Start(t)}) })
	t.Run("sqlite", func(t *testing.T) { testSnapshotRestore(t, &env{name: "sqlite"}) })
}

// brokenReader returns errBroken after n bytes of r.
type brokenReader struct {
	r io.Reader
	n int
}

var errBroken = errors.New("the snapshot stream broke")

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errBroken
	}
	k, err := b.r.Read(p[:min(len(p), b.n)])
	b.n -= k
	return k, err
}

func testSnapshotRestore(t *testing.T, e *env) {
	topics := []string{"s.a", "s-b"}
	srcDB, dstDB := e.newDB(t), e.newDB(t)
	open := func(d db, id string) *sqlstore.Store {
		t.Helper()
		m := mapping(t, id, sqlstore.MappingConfig{Topics: topics})
		cfg := d.base
		cfg.TargetID, cfg.Apply, cfg.Setup, cfg.SnapshotTables = types.TargetID(id), m.Apply, m.Setup, m.Tables()
		s, err := sqlstore.Open(ctxT(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	src, dst := open(srcDB, "a"), open(dstDB, "b")
	if src.SnapshotFormat() != "sqlstore/"+e.name+"/1" {
		t.Fatalf("format %q", src.SnapshotFormat())
	}
	f := newFeed(4)
	f.st.LogClusterID, f.st.LogIncarnation = "c", "i"
	var ds []*targetpb.Delivery
	for i := range 300 {
		ds = append(ds, f.txn(types.LSN(2*i+1),
			"s.a", ms(msg(fmt.Sprint("k", i), fmt.Sprintf(`{"i":%d,"big":12345678901234567890}`, i), "h", "v")),
			"s-b", ms(msg("", string([]byte{0, byte(i), 0xff})))))
	}
	if err := src.Apply(ds, f.next()); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var snap target.State
	if err := src.Snapshot(ctxT(t), func(st target.State) (io.Writer, error) { snap = st; return &buf, nil }); err != nil {
		t.Fatal(err)
	}
	if !target.SameData(snap, f.next()) {
		t.Fatalf("snapshot State %+v, want %+v", snap, f.next())
	}
	t.Logf("%s: snapshot of %d bytes at lsn %d", e.name, buf.Len(), snap.AppliedLSN)

	_, err := dst.Restore(ctxT(t), snap, &brokenReader{r: bytes.NewReader(buf.Bytes()), n: buf.Len() / 2})
	if !errors.Is(err, errBroken) {
		t.Fatalf("interrupted restore: %v, want %v", err, errBroken)
	}
	if st, err := dst.State(); err != nil || st.AppliedLSN != 0 || len(st.Topics) != 0 {
		t.Fatalf("after the interrupted restore: State %+v, %v", st, err)
	}
	for _, table := range []string{"s_a", "s_b"} {
		if n := dstDB.query("SELECT count(*) FROM " + table); n[0][0] != "0" {
			t.Fatalf("after the interrupted restore %s holds %s rows", table, n[0][0])
		}
	}
	got, err := dst.Restore(ctxT(t), snap, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if st, err := dst.State(); err != nil || !target.SameData(st, snap) || !target.SameData(got, snap) {
		t.Fatalf("restored State %+v (returned %+v), %v; want %+v", st, got, err, snap)
	}
	sameTables(t, srcDB, dstDB, true)
	if _, err := dst.Restore(ctxT(t), snap, bytes.NewReader(buf.Bytes())); !errors.Is(err, target.ErrNotEmpty) {
		t.Fatalf("second restore: %v, want ErrNotEmpty", err)
	}

	tail := []*targetpb.Delivery{f.txn(1000, "s.a", ms(msg("tail", "t")), "s-b", ms(msg("", "x")))}
	for _, s := range []*sqlstore.Store{src, dst} {
		if err := s.Apply(tail, f.next()); err != nil {
			t.Fatal(err)
		}
	}
	sameTables(t, srcDB, dstDB, false)
}

// sameTables fails unless both databases' mapped tables hold the same
// rows, with the same applied_at when withTime (each sink stamps the rows
// it applies itself).
func sameTables(t *testing.T, a, b db, withTime bool) {
	t.Helper()
	at := ", CAST(applied_at AS text)"
	if !withTime {
		at = ""
	}
	for _, q := range []string{
		"SELECT lsn, topic_offset, key, value, CAST(value_json AS text), CAST(headers AS text)" + at + " FROM s_a ORDER BY topic_offset",
		"SELECT lsn, topic_offset, key, value" + at + " FROM s_b ORDER BY topic_offset",
	} {
		ra, rb := a.query(q), b.query(q)
		if len(ra) == 0 || !reflect.DeepEqual(ra, rb) {
			t.Fatalf("%s:\n sibling %d rows (first %v)\n restored %d rows (first %v)", q, len(ra), first(ra), len(rb), first(rb))
		}
	}
}

func first(rows [][]string) []string {
	if len(rows) == 0 {
		return nil
	}
	return rows[0]
}

// TestSnapshotWithoutTables: a store not told its tables refuses to
// snapshot or restore (target.ErrSnapshotUnsupported: the RPCs answer
// SNAPSHOT_UNSUPPORTED) rather than copy nothing.
func TestSnapshotWithoutTables(t *testing.T) {
	d := (&env{name: "sqlite"}).newDB(t)
	s := d.open("a", mapping(t, "a", sqlstore.MappingConfig{Topics: []string{"x"}}))
	err := s.Snapshot(ctxT(t), func(target.State) (io.Writer, error) { return io.Discard, nil })
	if !errors.Is(err, target.ErrSnapshotUnsupported) {
		t.Fatalf("Snapshot: %v, want ErrSnapshotUnsupported", err)
	}
	if _, err := s.Restore(ctxT(t), target.State{}, bytes.NewReader(nil)); !errors.Is(err, target.ErrSnapshotUnsupported) {
		t.Fatalf("Restore: %v, want ErrSnapshotUnsupported", err)
	}
}
