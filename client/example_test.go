package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// exampleCluster starts a fresh single-node cluster in this process and
// returns its API addresses and a function that stops it. (Examples have
// no testing.TB for logstoretest.Start.)
func exampleCluster() (seeds []string, stop func()) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		panic(err)
	}
	rl, err1 := net.Listen("tcp", "127.0.0.1:0")
	al, err2 := net.Listen("tcp", "127.0.0.1:0")
	if err := errors.Join(err1, err2); err != nil {
		panic(err)
	}
	cfg := logstoretest.Config("n0", filepath.Join(dir, "n0"))
	cfg.RaftListener, cfg.APIAddr = rl, al.Addr().String()
	cfg.Bootstrap = []logstore.Peer{{ID: "n0", RaftAddr: rl.Addr().String(), APIAddr: al.Addr().String()}}
	st, err := serve.StartStore(cfg, al, "", cfg.Logger)
	if err != nil {
		panic(err)
	}
	n := st.Node
	deadline := time.Now().Add(30 * time.Second)
	for !n.IsLeader() { // a single voter elects itself within its election timeout
		if time.Now().After(deadline) {
			panic("example cluster: no leader after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return []string{n.APIAddr()}, func() { st.Close(); os.RemoveAll(dir) }
}

// Publish to two topics atomically, then read the transaction back.
func Example() {
	seeds, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := client.New(client.Config{Addrs: seeds})
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	p, err := cl.NewProducer(client.ProducerConfig{}) // random id
	if err != nil {
		panic(err)
	}
	res, err := p.AppendAtomic(ctx, map[string][][]byte{
		"orders": {[]byte("order-17")},
		"stock":  {[]byte("reserve sku-3"), []byte("reserve sku-9")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("lsn", res.LSN, "orders at", res.Offsets["orders"], "stock at", res.Offsets["stock"])

	r, err := cl.NewReader(client.ReaderConfig{FromLSN: res.LSN, ToLSN: res.LSN})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	txn, err := r.Next(ctx)
	if err != nil {
		panic(err)
	}
	for _, s := range txn.Slices {
		for i, m := range s.Messages {
			fmt.Printf("%s@%d %s\n", s.Topic, s.FirstOffset+uint64(i), m.Value)
		}
	}
	// Output:
	// lsn 1 orders at 0 stock at 0
	// orders@0 order-17
	// stock@0 reserve sku-3
	// stock@1 reserve sku-9
}

// Keys, headers, a condition and an offset commit in one transaction.
func ExampleTxn() {
	seeds, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := client.New(client.Config{Addrs: seeds})
	defer cl.Close()
	p, _ := cl.NewProducer(client.ProducerConfig{ID: "billing-1"})

	txn := client.NewTxn().
		AddKeyed("invoices", []byte("cust-42"), []byte(`{"total":12}`),
			&client.Header{Key: "content-type", Value: []byte("application/json")}).
		Add("audit", []byte("invoice for cust-42")).
		Expect("invoices", 0).                  // only if invoices is still empty
		CommitOffset("billing", "payments", 8). // consumed payments up to 8
		ExpectCommitted("billing", "payments", 0)
	res, err := p.Append(ctx, txn)
	if err != nil {
		panic(err)
	}
	off, _ := cl.CommittedOffset(ctx, "billing", "payments")
	fmt.Println("sequence", res.Sequence, "lsn", res.LSN, "payments committed at", off)

	tr, _ := cl.NewTopicReader(client.TopicReaderConfig{Topic: "invoices", Limit: 1})
	defer tr.Close()
	m, err := tr.Next(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %s %s=%s\n", m.Message.Key, m.Message.Value, m.Message.Headers[0].Key, m.Message.Headers[0].Value)
	// Output:
	// sequence 1 lsn 1 payments committed at 8
	// cust-42 {"total":12} content-type=application/json
}

// Optimistic concurrency: two writers expect the same next offset; one wins.
func ExampleTxn_Expect() {
	seeds, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := client.New(client.Config{Addrs: seeds})
	defer cl.Close()
	alice, _ := cl.NewProducer(client.ProducerConfig{})
	bob, _ := cl.NewProducer(client.ProducerConfig{})

	if _, err := alice.Append(ctx, client.NewTxn().Add("account-7", []byte("deposit 10")).Expect("account-7", 0)); err != nil {
		panic(err)
	}
	_, err := bob.Append(ctx, client.NewTxn().Add("account-7", []byte("withdraw 5")).Expect("account-7", 0))
	var ce *client.ConditionError
	if errors.As(err, &ce) {
		fmt.Println("bob lost:", ce.Topic, "is at", ce.Actual)
	}
	// Bob re-reads and retries at the actual offset.
	res, err := bob.Append(ctx, client.NewTxn().Add("account-7", []byte("withdraw 5")).Expect("account-7", ce.Actual))
	fmt.Println("bob retried:", res.Offsets["account-7"], err)
	// Output:
	// bob lost: account-7 is at 1
	// bob retried: 1 <nil>
}

// Follow the log from an LSN, keeping one topic.
func ExampleReader() {
	seeds, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := client.New(client.Config{Addrs: seeds})
	defer cl.Close()
	p, _ := cl.NewProducer(client.ProducerConfig{})
	for _, s := range []string{"a", "b", "c", "d"} {
		topic := "even"
		if s == "b" || s == "d" {
			topic = "odd"
		}
		if _, err := p.AppendAtomic(ctx, map[string][][]byte{topic: {[]byte(s)}}); err != nil {
			panic(err)
		}
	}
	r, _ := cl.NewReader(client.ReaderConfig{FromLSN: 2, Topics: []string{"even"}})
	defer r.Close()
	txn, err := r.Next(ctx) // LSN 2 is odd: skipped
	if err != nil {
		panic(err)
	}
	fmt.Println("lsn", txn.Lsn, string(txn.Slices[0].Messages[0].Value), "next", r.Position()) // 4 was seen too

	// Next waits at the end of the log until ctx ends; the position stays.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err = r.Next(short)
	fmt.Println(err, "next", r.Position())
	// Output:
	// lsn 3 c next 5
	// context deadline exceeded next 5
}

// Read-process-write exactly once: the output and the consumer's position
// commit together, conditioned on the position it resumed from.
func Example_readProcessWrite() {
	seeds, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _ := client.New(client.Config{Addrs: seeds})
	defer cl.Close()
	src, _ := cl.NewProducer(client.ProducerConfig{})
	for _, w := range []string{"alpha", "beta", "gamma"} {
		if _, err := src.AppendAtomic(ctx, map[string][][]byte{"words": {[]byte(w)}}); err != nil {
			panic(err)
		}
	}

	// process handles at most max messages of "words", as one run of a
	// consumer that may crash at any point and be restarted.
	process := func(max uint64) {
		p, _ := cl.NewProducer(client.ProducerConfig{}) // a new instance
		from, err := cl.CommittedOffset(ctx, "upper", "words")
		if err != nil {
			panic(err)
		}
		r, _ := cl.NewTopicReader(client.TopicReaderConfig{Topic: "words", FromOffset: from, Limit: max})
		defer r.Close()
		for {
			m, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				panic(err)
			}
			out := strings.ToUpper(string(m.Message.Value))
			_, err = p.Append(ctx, client.NewTxn().
				Add("shouted", []byte(out)).
				CommitOffset("upper", "words", m.Offset+1).
				ExpectCommitted("upper", "words", m.Offset))
			if errors.Is(err, client.ErrConditionFailed) {
				return // someone else processed it: restart from the committed offset
			}
			if err != nil {
				panic(err)
			}
		}
	}
	process(2) // "crashes" after two messages
	process(1) // a new instance resumes from the committed offset: gamma

	r, _ := cl.NewTopicReader(client.TopicReaderConfig{Topic: "shouted", Limit: 3})
	defer r.Close()
	for {
		m, err := r.Next(ctx)
		if err != nil {
			break
		}
		fmt.Println(m.Offset, string(m.Message.Value))
	}
	// Output:
	// 0 ALPHA
	// 1 BETA
	// 2 GAMMA
}
