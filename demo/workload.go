// Package demo is the WAL-apply workload of `logplayer dev --demo` and its
// checker.
//
// The workload is the paper's use case: a database transaction whose
// mutations live on several storage shards is one LogStore transaction with
// one slice per shard topic (`shard-N`, each message a shardpb.Mutation),
// plus an `orders` event and an `inventory` event, all committed atomically.
//
// The checker measures, never assumes, exactly-once delivery:
//   - Model replays the log read back from the LogStore and computes every
//     shard's expected key-value state; it also counts a mutation or event
//     id seen twice in the log (a producer retry that wrote twice).
//   - Recorder sits between the target SDK and each target's store and counts
//     how many times every (topic, offset) was durably applied, and when.
//   - Audit compares the two: a message applied twice is a duplicate, a
//     message of the log never applied is missing; CompareShard compares a
//     shard's real final state with the model's.
//
// Every mutation is unique: its key or value carries the id
// <run>/<client>/<seq>/<i>, where run is random per Generator family, client
// the producer, seq the producer's sequence number.
//
// Session is the whole demo against a running cluster (`logplayer demo` and
// `logplayer dev --demo` call it): watch the shards, Run, wait for delivery,
// Check.
//
// The events target of the orders and inventory topics has two stores:
// EventStore, in memory (`logplayer dev`), and EventLog, durable on bbolt
// (`logplayer events`), which keeps every applied message for
// ReadEventLog.
//
// Goroutines: none in Generator, Model or Recorder (Recorder is safe for
// concurrent use); Run starts one goroutine per client (each owns its
// Generator) and one progress ticker, and waits for all of them; Session
// adds one WatchApplied per shard, stopped before it returns.
package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// Topic names of the workload.
const (
	OrdersTopic    = "orders"
	InventoryTopic = "inventory"
)

// HotKeys is how many keys per shard every transaction may overwrite or
// delete (the rest of its mutations write keys of their own). Overwrites make
// the final state depend on the apply order, so a reordered or repeated
// mutation shows in the state, not only in the counters.
const HotKeys = 16

// ShardTopic is the topic of shard n.
func ShardTopic(n int) string { return fmt.Sprintf("shard-%d", n) }

// Generator makes the transactions of one producer. Not safe for concurrent
// use: give each client its own.
type Generator struct {
	run    string // 4 hex digits, same for all clients of one Run
	client int
	shards int
	rng    *rand.Rand
	seq    uint64
	// id and epoch: the producer's registration (Registered); "" and 0
	// before it, when requests carry Name as a legacy id.
	id    string
	epoch uint64
}

// NewGenerator returns the generator of producer client (0, 1, …) of run
// (4 hex digits) writing to shards shards, with randomness from seed.
func NewGenerator(run string, client, shards int, seed uint64) *Generator {
	if shards < 2 {
		panic(fmt.Sprintf("demo: %d shards, want at least 2", shards))
	}
	return &Generator{run: run, client: client, shards: shards, rng: rand.New(rand.NewPCG(seed, uint64(client)))}
}

// Name is the producer name this generator registers (InitProducer).
func (g *Generator) Name() string { return fmt.Sprintf("demo-%s-%d", g.run, g.client) }

// Registered makes the requests carry the registered producer id and epoch
// InitProducer answered for Name. Call it before the first Next: a
// registration starts at sequence 1, and the sequence names the
// transaction's unique keys.
func (g *Generator) Registered(id string, epoch uint64) {
	if g.seq != 0 {
		panic(fmt.Sprintf("demo: Registered after %d transactions", g.seq))
	}
	g.id, g.epoch = id, epoch
}

// Order is the `orders` event of a transaction.
type Order struct {
	Txn   string `json:"txn"`
	SKU   int    `json:"sku"`
	Qty   int    `json:"qty"`
	Shard []int  `json:"shards"`
}

// Reservation is the `inventory` event of a transaction.
type Reservation struct {
	Txn   string `json:"txn"`
	SKU   int    `json:"sku"`
	Delta int    `json:"delta"`
}

// Next returns the next transaction: 2 or 3 distinct shards with 1–3
// mutations each, an order and a reservation. Its producer sequence is the
// generator's next one (first is 1); a caller that retries must resend the
// same request. Before Registered it carries Name as an unregistered
// (legacy) id, which a cluster refuses unless it allows legacy producers.
func (g *Generator) Next() *logstorepb.AppendRequest {
	g.seq++
	txn := fmt.Sprintf("%s/%d/%d", g.run, g.client, g.seq)
	n := 2 + g.rng.IntN(2)
	if n > g.shards {
		n = g.shards
	}
	picked := g.rng.Perm(g.shards)[:n]
	req := &logstorepb.AppendRequest{ProducerId: g.id, ProducerEpoch: g.epoch, Sequence: g.seq}
	if g.id == "" {
		req.ProducerId = g.Name()
	}
	for _, sh := range picked {
		s := &logstorepb.Slice{Topic: ShardTopic(sh)}
		muts := 1 + g.rng.IntN(3)
		for i := range muts {
			s.Messages = append(s.Messages, &logstorepb.Message{Value: g.mutation(txn, i)})
		}
		req.Slices = append(req.Slices, s)
	}
	sku := g.rng.IntN(1000)
	qty := 1 + g.rng.IntN(5)
	order, _ := json.Marshal(Order{Txn: txn, SKU: sku, Qty: qty, Shard: picked})
	res, _ := json.Marshal(Reservation{Txn: txn, SKU: sku, Delta: -qty})
	req.Slices = append(req.Slices,
		&logstorepb.Slice{Topic: OrdersTopic, Messages: []*logstorepb.Message{{Key: []byte(txn), Value: order}}},
		&logstorepb.Slice{Topic: InventoryTopic, Messages: []*logstorepb.Message{{Key: []byte(txn), Value: res}}},
	)
	return req
}

// TxnID is the id of a transaction Next made: the key of its orders event.
func TxnID(req *logstorepb.AppendRequest) string {
	for _, s := range req.Slices {
		if s.Topic == OrdersTopic && len(s.Messages) > 0 {
			return string(s.Messages[0].Key)
		}
	}
	return ""
}

// mutation i of txn: the first writes a key of its own (value: its id); the
// others overwrite (90 %) or delete (10 %) a hot key.
func (g *Generator) mutation(txn string, i int) []byte {
	id := fmt.Sprintf("%s/%d", txn, i)
	m := &shardpb.Mutation{Op: shardpb.Mutation_PUT, Value: []byte(id)}
	switch {
	case i == 0:
		m.Key = UniqueKey(g.run, g.client, g.seq, i)
	case g.rng.IntN(10) == 0:
		m.Op, m.Key, m.Value = shardpb.Mutation_DELETE, HotKey(g.rng.IntN(HotKeys)), nil
	default:
		m.Key = HotKey(g.rng.IntN(HotKeys))
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("demo: marshal mutation: %v", err))
	}
	return b
}

// UniqueKey is the key only mutation i of (run, client, seq) writes. Keys
// are 'u' or 'h' followed by lower-case hex digits, so ScanAll can split any
// prefix by KeyAlphabet.
func UniqueKey(run string, client int, seq uint64, i int) []byte {
	return fmt.Appendf(nil, "u%s%04x%012x%x", run, client, seq, i)
}

// HotKey is hot key k of every shard.
func HotKey(k int) []byte { return fmt.Appendf(nil, "h%02x", k) }

// KeyAlphabet lists every byte a workload key has after its first.
const KeyAlphabet = "0123456789abcdef"

// KeyKinds lists the first byte of every workload key.
const KeyKinds = "hu"

// NewRunID returns 4 random hex digits naming a run.
func NewRunID(seed uint64) string {
	return fmt.Sprintf("%04x", rand.New(rand.NewPCG(seed, 0x5eed)).IntN(1<<16))
}
