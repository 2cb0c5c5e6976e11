package sqlstore_test

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"syscall"
	"testing"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target/sqlstore"
)

// Environment of the crash child (TestCrashChild run by the test binary
// itself).
const (
	envCrashDialect = "SQLSTORE_CRASH_DIALECT"
	envCrashDSN     = "SQLSTORE_CRASH_DSN"
	envCrashPath    = "SQLSTORE_CRASH_PATH"
)

// A sink process killed (SIGKILL) inside Apply, after its rows were written
// and before the commit, leaves the database at the previous batch: the old
// State, none of the new rows.
func testKilledMidTransaction(t *testing.T, d db) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDialect+"="+d.base.Dialect.String(), envCrashDSN+"="+d.base.DSN, envCrashPath+"="+d.base.Path)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("crash child did not die of SIGKILL: %v\n%s", err, out)
	}
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}})
	s := d.open("sink", m)
	st, err := s.State()
	f := crashFeed()
	if err != nil || !reflect.DeepEqual(st, f.next()) {
		t.Fatalf("State after the crash %+v %v, want the first batch's %+v", st, err, f.next())
	}
	if rows := d.query(`SELECT lsn, value FROM t ORDER BY topic_offset`); !reflect.DeepEqual(rows, [][]string{{"1", "one"}}) {
		t.Fatalf("rows after the crash %q, want only the first batch's", rows)
	}
}

// crashFeed is the first (committed) batch of the crash child.
func crashFeed() *feed {
	f := newFeed(1)
	f.txn(1, "t", ms(msg("", "one")))
	return f
}

// TestCrashChild is the sink process of testKilledMidTransaction: it commits
// one batch, then kills itself inside the second Apply.
func TestCrashChild(t *testing.T) {
	dialect := os.Getenv(envCrashDialect)
	if dialect == "" {
		return // not run as the child: nothing to do
	}
	m := mapping(t, "sink", sqlstore.MappingConfig{Topics: []string{"t"}})
	cfg := sqlstore.Config{TargetID: "sink", DSN: os.Getenv(envCrashDSN), Path: os.Getenv(envCrashPath), Setup: m.Setup, Dialect: sqlstore.SQLite}
	if dialect == sqlstore.Postgres.String() {
		cfg.Dialect = sqlstore.Postgres
	}
	kill := false
	cfg.Apply = func(ctx context.Context, tx sqlstore.Tx, ds []*targetpb.Delivery) error {
		if err := m.Apply(ctx, tx, ds); err != nil {
			return err
		}
		if kill {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		return nil
	}
	s, err := sqlstore.Open(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFeed(1)
	mustApply(t, s, []*targetpb.Delivery{f.txn(1, "t", ms(msg("", "one")))}, f.next())
	kill = true
	_ = s.Apply([]*targetpb.Delivery{f.txn(2, "t", ms(msg("", "two"), msg("", "three")))}, f.next())
	t.Fatal("still alive after the kill")
}
