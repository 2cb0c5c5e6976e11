package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// countingHandler counts log records whose message contains substr.
type countingHandler struct {
	substr string
	n      *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// TestReadersResumeAcrossNodeFailures: a Reader (whole log) and a
// TopicReader follow a 3-node cluster under writes while each node in turn
// is stopped and restarted; both see every LSN / offset exactly once, in
// order, and at least one of their streams failed over.
func TestReadersResumeAcrossNodeFailures(t *testing.T) {
	c := logstoretest.Start(t, 3, nil)
	var failovers atomic.Int64
	rcl, err := client.New(client.Config{Addrs: c.Addrs(), Logger: slog.New(countingHandler{"resuming on another node", &failovers})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcl.Close() })
	wcl := newClient(t, c.Addrs()...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wrote atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer: one txn per LSN, value = its index, topics "all" and "x"
		defer wg.Done()
		p, _ := wcl.NewProducer(client.ProducerConfig{})
		for i := 0; ctx.Err() == nil; i++ {
			actx, acancel := context.WithTimeout(ctx, 60*time.Second)
			_, err := p.AppendAtomic(actx, map[string][][]byte{"all": {[]byte(fmt.Sprint(i))}, "x": {[]byte(fmt.Sprint(i))}})
			acancel()
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("append %d: %v", i, err)
				}
				return
			}
			wrote.Add(1)
		}
	}()

	var lsnSeen, offSeen atomic.Uint64
	readErr := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		r, err := rcl.NewReader(client.ReaderConfig{FromLSN: 1})
		if err != nil {
			readErr <- err
			return
		}
		defer r.Close()
		for want := uint64(1); ; want++ {
			txn, err := r.Next(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					readErr <- err
				}
				return
			}
			if txn.Lsn != want || string(txn.Slices[0].Messages[0].Value) != fmt.Sprint(want-1) {
				readErr <- fmt.Errorf("reader got lsn %d (%q), want %d", txn.Lsn, txn.Slices[0].Messages[0].Value, want)
				return
			}
			lsnSeen.Store(want)
		}
	}()
	go func() {
		defer wg.Done()
		r, err := rcl.NewTopicReader(client.TopicReaderConfig{Topic: "x", WaitForTopic: true}) // started with the writer
		if err != nil {
			readErr <- err
			return
		}
		defer r.Close()
		for want := uint64(0); ; want++ {
			m, err := r.Next(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					readErr <- err
				}
				return
			}
			if m.Offset != want || string(m.Message.Value) != fmt.Sprint(want) {
				readErr <- fmt.Errorf("topic reader got offset %d (%q), want %d", m.Offset, m.Message.Value, want)
				return
			}
			offSeen.Store(want + 1)
		}
	}()
	progress := func(what string) {
		t.Helper()
		from := lsnSeen.Load()
		testwait.For(t, 60*time.Second, what, func() bool {
			select {
			case err := <-readErr:
				t.Fatal(err)
			default:
			}
			return lsnSeen.Load() >= from+20 && offSeen.Load() >= from+20
		})
	}
	progress("readers start")
	for i := range c.Nodes {
		c.Stop(i)
		progress(fmt.Sprintf("reading with node %d down", i))
		c.Restart(i)
		progress(fmt.Sprintf("reading after node %d restarted", i))
	}
	cancel()
	wg.Wait()
	close(readErr)
	for err := range readErr {
		t.Error(err)
	}
	if failovers.Load() == 0 {
		t.Fatal("no read stream failed over: the test stopped no node a reader used")
	}
	t.Logf("%d txns written, reader at lsn %d, topic reader at offset %d, %d failovers", wrote.Load(), lsnSeen.Load(), offSeen.Load(), failovers.Load())
}
