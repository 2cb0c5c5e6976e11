package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/logplayer/logplayer/internal/pgtest"
)

// A started server accepts a connection and a query, survives an immediate
// stop and a restart on the same port, and keeps a committed row.
func TestStartStopRestart(t *testing.T) {
	s := pgtest.Start(t)
	dsn := s.CreateDB("t1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec := func(q string) {
		t.Helper()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE x (n int); INSERT INTO x VALUES (42)")
	s.Stop("immediate")
	s.Start()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT n FROM x").Scan(&n); err != nil || n != 42 {
		t.Fatalf("after a crash and restart: n=%d err=%v, want 42", n, err)
	}
}
