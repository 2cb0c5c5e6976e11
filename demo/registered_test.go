package demo

import (
	"context"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// TestRunOnRegisteredProducersOnly: the workload runs against a real
// LogStore that refuses legacy producer ids (the default: no
// AllowLegacyProducers, as deploy/compose.yaml runs its stores), and every
// acknowledged transaction is in the log once.
func TestRunOnRegisteredProducersOnly(t *testing.T) {
	c := logstoretest.Start(t, 1, nil)
	cl, err := client.New(client.Config{Addrs: c.Addrs(), Logger: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Appender: cl, Clients: 2, Duration: 300 * time.Millisecond, Run: "c0de", Seed: 3, Logger: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatalf("Run against a store without legacy producers: %v", err)
	}
	if res.Committed == 0 {
		t.Fatal("nothing committed")
	}
	m := NewModel()
	if err := ReadLog(ctx, cl, 1, res.MaxLSN, m.Apply); err != nil {
		t.Fatal(err)
	}
	if m.LogDuplicates() != 0 || m.AckedNotInLog(res.Acked) != 0 {
		t.Fatalf("log duplicates %d, acked not in the log %d", m.LogDuplicates(), m.AckedNotInLog(res.Acked))
	}
}
