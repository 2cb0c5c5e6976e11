package client_test

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

var long = flag.Bool("long", false, "run the long fault-injection loops")

func TestMain(m *testing.M) {
	logstoretest.MaybeRunNode() // node processes of the crash tests
	os.Exit(m.Run())
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Addrs: addrs, Logger: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func newProducer(t testing.TB, cl *client.Client, cfg client.ProducerConfig) *client.Producer {
	t.Helper()
	p, err := cl.NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
