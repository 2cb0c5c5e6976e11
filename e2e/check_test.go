package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/shard"
)

// verify stops the workload and checks everything the package doc lists:
// acknowledged Appends against the log read back, the log's transactions
// whole, every shard's state (live, then its file after stopTargets stopped
// the shards and put their files in each shardNode.dir), the events
// target's file when c has one (stopTargets stops it too), and the refusal
// counters w sampled.
func verify(t testing.TB, began time.Time, c *cluster, ld *load, w *refusalWatch, stopTargets func()) {
	t.Helper()
	cl, shards := c.client, c.shards
	res, err := ld.stop()
	if err != nil {
		t.Fatalf("workload: %v", err)
	}
	acks := ld.acks.acks()
	t.Logf("%v: load stopped: %d acknowledged, %d retries", since(began), len(acks), res.Retries)

	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	st, err := cl.LeaderStatus(ctx)
	if err != nil {
		t.Fatalf("leader status: %v", err)
	}
	head := st.HeadLsn
	if m := ld.acks.max.Load(); head < m {
		t.Fatalf("leader's head lsn %d below the highest acknowledged lsn %d", head, m)
	}
	facts, err := readLog(ctx, cl, head)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	checkAcks(t, facts, acks)
	checkDelivery(ctx, t, cl, shards, ld.rec, res, head)
	ld.stopWatching()
	if e := c.events; e != nil {
		c.waitFor(catchUpMax, e.id+" to apply the head", func() error {
			_, err := e.applied(head)
			return err
		})
	}

	bad, allowed, scrapes, err := w.close()
	if err != nil {
		t.Error(err)
	}
	if len(bad) > 0 {
		t.Errorf("targets refused deliveries:\n%s", strings.Join(bad, "\n"))
	}
	t.Logf("refusal counters: %d scrapes; refusals the faults allowed: %v", scrapes, allowed)
	if c.group == nil {
		info, err := checkPlayerMetrics(c.playerMetrics)
		if err != nil {
			t.Error(err)
		}
		t.Logf("LogPlayer (last instance):\n%s", strings.Join(info, "\n"))
	} else {
		c.group.checkMetrics(t)
	}

	if st, err = cl.LeaderStatus(ctx); err != nil {
		t.Fatalf("leader status: %v", err)
	}
	// Single LogPlayer: every shard's durable epoch is the last LogPlayer's,
	// the cluster's epoch. A group: each target's is its last fencing
	// token (from the same counter, so at most the cluster's epoch).
	epochOf := func(string) (uint64, string) { return st.Epoch, "the last LogPlayer's" }
	if c.group != nil {
		epochOf = c.group.lastTokens(ctx, t, st.Epoch)
	}
	stopTargets()
	checkDurable(t, shards, facts, head, epochOf)
	if c.events != nil {
		checkEvents(t, c.events, facts, head, epochOf)
	}
	t.Logf("%v: checked %d transactions, %d acknowledged (head lsn %d, epoch %d)", since(began), head, len(acks), head, st.Epoch)
}

// since is the time from began, rounded for logs.
func since(began time.Time) time.Duration { return time.Since(began).Round(time.Millisecond) }

// checkTimeout bounds reading the log back and checking the shards.
const checkTimeout = 3 * time.Minute

// catchUpMax bounds the wait for every shard to apply the log's last
// transaction for its topic once the faults stopped (liveness).
const catchUpMax = 90 * time.Second

// logFacts is what the log read back says, beyond demo.Model.
type logFacts struct {
	model *demo.Model
	txn   []string       // txn[lsn] is the id of the transaction at lsn (txn[0] unused)
	count map[string]int // how many transactions carry each id
	// events are the messages of eventsTopics in LSN order: what an
	// events target must hold.
	events []demo.Event
}

// readLog reads the whole log [1, head] back and checks every transaction
// is a whole workload transaction (§7.1): its orders and inventory events
// name the same id, and it has a slice for exactly the shards its order
// lists, each with 1-3 valid mutations. demo.Model checks dense LSNs and
// per-topic offsets (§7.3).
func readLog(ctx context.Context, r demo.LogReader, head uint64) (*logFacts, error) {
	f := &logFacts{model: demo.NewModel(), txn: make([]string, head+1), count: map[string]int{}}
	err := demo.ReadLog(ctx, r, 1, head, func(t *logstorepb.Transaction) error {
		if err := f.model.Apply(t); err != nil {
			return err
		}
		id, err := wholeTxn(t)
		if err != nil {
			return fmt.Errorf("lsn %d: %w", t.Lsn, err)
		}
		f.txn[t.Lsn] = id
		f.count[id]++
		f.events = appendEvents(f.events, t)
		return nil
	})
	return f, err
}

// wholeTxn checks t is a complete workload transaction and returns its id.
func wholeTxn(t *logstorepb.Transaction) (string, error) {
	if len(t.Slices) == 1 && t.Slices[0].Topic == probeTopic && len(t.Slices[0].Messages) == 1 {
		return string(t.Slices[0].Messages[0].Key), nil // TestNemesis's prober
	}
	var order demo.Order
	var res demo.Reservation
	shards := map[string]int{}
	for _, s := range t.Slices {
		switch {
		case s.Topic == demo.OrdersTopic && len(s.Messages) == 1:
			if err := json.Unmarshal(s.Messages[0].Value, &order); err != nil {
				return "", fmt.Errorf("order: %w", err)
			}
		case s.Topic == demo.InventoryTopic && len(s.Messages) == 1:
			if err := json.Unmarshal(s.Messages[0].Value, &res); err != nil {
				return "", fmt.Errorf("reservation: %w", err)
			}
		case strings.HasPrefix(s.Topic, "shard-") && len(s.Messages) >= 1 && len(s.Messages) <= 3:
			shards[s.Topic] = len(s.Messages)
		default:
			return "", fmt.Errorf("unexpected slice: topic %q with %d messages", s.Topic, len(s.Messages))
		}
	}
	if order.Txn == "" || order.Txn != res.Txn {
		return "", fmt.Errorf("order of txn %q, reservation of txn %q", order.Txn, res.Txn)
	}
	var want []string
	for _, n := range order.Shard {
		want = append(want, demo.ShardTopic(n))
	}
	var got []string
	for topic := range shards {
		got = append(got, topic)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return "", fmt.Errorf("txn %s: order names shards %v, slices for %v", order.Txn, want, got)
	}
	return order.Txn, nil
}

// checkAcks checks every acknowledged Append is in the log exactly once,
// at the LSN it was acknowledged with (§7.2, §7.5), and that no transaction
// of the log, acknowledged or not, is there twice (ackViolations).
func checkAcks(t testing.TB, f *logFacts, acks []histAck) {
	t.Helper()
	if v := ackViolations(f.txn[1:], acks); !v.OK() {
		t.Errorf("%d violations of the acknowledged appends:\n%s", v.Count, strings.Join(v.List, "\n"))
	}
	if d := f.model.LogDuplicates(); d != 0 {
		t.Errorf("%d mutation or event ids written twice to the log", d)
	}
}

// checkDelivery runs demo.Check over the whole log: it waits for every shard
// to apply the last transaction of its topic, then compares each shard's
// whole state (Scan) with the model built from the log. Hot keys are
// overwritten by many transactions, each with its own value, so the value a
// hot key ends with names the last write applied to it: a write applied
// again after a later one, or lost, shows as a wrong value; a deleted key
// that a repeated PUT brought back shows as unexpected.
func checkDelivery(ctx context.Context, t testing.TB, log demo.LogReader, shards []*shardNode, rec *demo.Recorder, res *demo.Result, head uint64) {
	t.Helper()
	clients := map[string]shardpb.ShardClient{}
	for _, s := range shards {
		clients[s.id] = s.client
	}
	rep, err := demo.Check(ctx, demo.CheckConfig{
		Log: log, After: 0, Through: head, Shards: clients,
		Recorder: rec, CatchUp: catchUpMax,
	}, res)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("delivery check:\n%s", out.String())
	if !rep.OK || len(rep.Notes) > 0 || rep.Expected == 0 || rep.Delivered != rep.Expected {
		t.Errorf("delivery check failed: %+v", rep)
	}
}

// checkDurable reads each stopped shard's bbolt file (shard.ReadDir) and
// checks its durable State: the next offset of its topic is the number of
// messages the log holds for it (every message applied, none skipped), its
// applied LSN reaches the topic's last message and not past the head, its
// epoch is what epochOf says (the last LogPlayer's epoch, or the
// target's last fencing token in a group: fencing persisted), and the data
// equals the model.
func checkDurable(t testing.TB, shards []*shardNode, f *logFacts, head uint64, epochOf func(id string) (uint64, string)) {
	t.Helper()
	for _, s := range shards {
		data, st, err := shard.ReadDir(s.dir)
		if err != nil {
			t.Errorf("%s: %v", s.id, err)
			continue
		}
		want := uint64(f.model.Messages(s.id, 0, head))
		if got := uint64(st.Topics[s.id]); got != want {
			t.Errorf("%s: durable next offset %d, the log has %d messages for it", s.id, got, want)
		}
		if last := f.model.LastLSNOf(s.id, head); uint64(st.AppliedLSN) < last || uint64(st.AppliedLSN) > head {
			t.Errorf("%s: durable applied lsn %d, want in [%d, %d]", s.id, st.AppliedLSN, last, head)
		}
		if epoch, whose := epochOf(s.id); uint64(st.Epoch) != epoch {
			t.Errorf("%s: durable epoch %d, want %s %d", s.id, st.Epoch, whose, epoch)
		}
		if d := f.model.CompareShard(s.id, data); !d.OK() || d.Keys == 0 {
			t.Errorf("%s: file differs from the model: %+v", s.id, d)
		}
		t.Logf("%s: durable applied lsn %d, epoch %d, next offset %d, %d keys", s.id, st.AppliedLSN, st.Epoch, st.Topics[s.id], len(data))
	}
}
