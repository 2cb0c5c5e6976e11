package storeconn

import (
	"context"
	"testing"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// BenchmarkCallOverhead is Conn.Call's own cost for a call whose first
// attempt succeeds, with no network: the attempt returns at once. The
// caller's context has a deadline (deadline=caller, as bench store's in
// logstore/bench/bench.go) or none (deadline=none: Call gives it
// CallTimeout); every attempt has AttemptTimeout, as the client's do.
func BenchmarkCallOverhead(b *testing.B) {
	c, err := New(Config{
		Nodes: 3,
		Node: func(context.Context, int) (logstorepb.LogStoreClient, error) {
			return nil, nil
		},
		InitialBackoff: 10 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
		AttemptTimeout: 10 * time.Second, CallTimeout: 30 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	p := Policy{Name: "bench", Retry: apierr.NotApplied, Leader: true}
	attempt := func(context.Context, int, logstorepb.LogStoreClient) error { return nil }
	b.Run("deadline=caller", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Call(ctx, p, attempt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("deadline=none", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Call(context.Background(), p, attempt); err != nil {
				b.Fatal(err)
			}
		}
	})
}
