package report_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/client/report"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// The operations against a real 3-node LogStore (logstoretest): what
// logplayer's client commands do between parsing their flags and printing.

func TestOperations(t *testing.T) {
	c := logstoretest.Start(t, 3, nil)
	cl, err := client.New(client.Config{Addrs: c.Addrs(), Logger: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// append: three transactions, the last through a registered producer.
	put, err := report.ParseMutation(shardpb.Mutation_PUT, "shard-0:user/1=alice")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		values   []report.Value
		muts     []report.Mutation
		raw      bool
		producer string
		want     report.AppendResult
	}{
		{values: []report.Value{{Topic: "orders", Value: `{"id": 1}`}}, muts: []report.Mutation{put},
			want: report.AppendResult{LSN: 1, Offsets: map[string]uint64{"orders": 0, "shard-0": 0}}},
		{values: []report.Value{{Topic: "orders", Value: `{"id":2}`}, {Topic: "logs", Value: "plain"}}, raw: true,
			want: report.AppendResult{LSN: 2, Offsets: map[string]uint64{"orders": 1, "logs": 0}}},
		{values: []report.Value{{Topic: "orders", Value: `{"id":3}`}}, producer: "checkout",
			want: report.AppendResult{LSN: 3, Offsets: map[string]uint64{"orders": 2}, ProducerID: "1", Epoch: 1, Sequence: 1}},
	} {
		slices, err := report.Slices(tc.values, tc.muts, nil, tc.raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := report.Append(ctx, cl, &logstorepb.AppendRequest{Slices: slices}, tc.producer)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if fmt.Sprint(*res) != fmt.Sprint(tc.want) {
			t.Fatalf("append %d: %+v, want %+v", i, *res, tc.want)
		}
	}

	// tail: transactions by LSN, and one topic by offset.
	for _, tc := range []struct {
		name string
		cfg  report.TailConfig
		want []string // each line's LSN and topics, or topic and offset
	}{
		{"to the head", report.TailConfig{From: 1}, []string{"1 orders,shard-0", "2 orders,logs", "3 orders"}},
		{"limit", report.TailConfig{From: 1, Limit: 2}, []string{"1 orders,shard-0", "2 orders,logs"}},
		{"from to", report.TailConfig{From: 2, To: 2}, []string{"2 orders,logs"}},
		{"filter", report.TailConfig{From: 1, Topics: []string{"logs"}}, []string{"2 logs"}},
		{"new", report.TailConfig{From: 1, New: true}, nil},
		{"past the head", report.TailConfig{From: 9}, nil},
		{"topic", report.TailConfig{Topic: "orders", Offset: 1}, []string{"orders@1", "orders@2"}},
		{"topic limit", report.TailConfig{Topic: "orders", Limit: 1}, []string{"orders@0"}},
		{"topic past its end", report.TailConfig{Topic: "orders", Offset: 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Timeout = 30 * time.Second
			var got []string
			err := report.Tail(ctx, cl, tc.cfg, func(line any) error {
				switch l := line.(type) {
				case report.TxnLine:
					var topics []string
					for _, s := range l.Slices {
						topics = append(topics, s.Topic)
					}
					got = append(got, fmt.Sprintf("%d %s", l.LSN, strings.Join(topics, ",")))
				case report.TopicLine:
					got = append(got, fmt.Sprintf("%s@%d", l.Topic, l.Offset))
				default:
					t.Fatalf("line %T", line)
				}
				return nil
			})
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if err := report.Tail(ctx, cl, report.TailConfig{Topic: "nosuch", Timeout: time.Minute}, func(any) error { return nil }); !errors.Is(err, client.ErrUnknownTopic) || apierr.CodeOf(err) != logstorepb.ErrorCode_UNKNOWN_TOPIC {
		t.Fatalf("tail of an unknown topic: %v, want ErrUnknownTopic", err)
	}
	// emit's error comes back as it is; ctx ending while following is Stopped.
	errFull := errors.New("disk full")
	if err := report.Tail(ctx, cl, report.TailConfig{From: 1, Timeout: time.Minute}, func(any) error { return errFull }); err != errFull {
		t.Fatalf("emit's error: %v", err)
	}
	fctx, fcancel := context.WithCancel(ctx)
	var stopped *report.Stopped
	if err := report.Tail(fctx, cl, report.TailConfig{From: 1, Follow: true, Timeout: time.Minute}, func(any) error { fcancel(); return nil }); !errors.As(err, &stopped) {
		t.Fatalf("follow until ctx ends: %v, want *Stopped", err)
	}

	// topics.
	for _, tc := range []struct{ topic, pattern, want string }{
		{"orders", "", "declared topic orders with schema bytes"},
		{"orders", "", "declared topic orders with schema bytes (was bytes)"},
		{"", "log*", "declared pattern log* with schema bytes"},
	} {
		done, err := report.DeclareTopic(ctx, cl, tc.topic, tc.pattern, logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES)
		if err != nil || string(done) != tc.want {
			t.Fatalf("declare %s%s: %q, %v; want %q", tc.topic, tc.pattern, done, err, tc.want)
		}
	}
	all, err := report.ListTopics(ctx, cl, 0)
	if err != nil || len(all.Topics) != 3 || all.Truncated || len(all.Patterns) != 1 || all.Patterns[0].Pattern != "log*" {
		t.Fatalf("list: %+v, %v", all, err)
	}
	first, err := report.ListTopics(ctx, cl, 2)
	if err != nil || len(first.Topics) != 2 || !first.Truncated || len(first.Patterns) != 1 || first.Topics[1].Topic != "orders" {
		t.Fatalf("list --limit 2: %+v, %v", first, err)
	}
	if info, err := report.DescribeTopic(ctx, cl, "orders"); err != nil || info.NextOffset != 3 || info.DeclaredBy != "orders" {
		t.Fatalf("describe orders: %+v, %v", info, err)
	}
	if _, err := report.DescribeTopic(ctx, cl, "nosuch"); apierr.CodeOf(err) != logstorepb.ErrorCode_UNKNOWN_TOPIC {
		t.Fatalf("describe nosuch: %v", err)
	}

	// Refusals the operations find out themselves.
	var no *report.Refusal
	if _, err := report.RemoveServer(ctx, cl, "n9"); !errors.As(err, &no) || err.Error() != `no server "n9" in the configuration (members: n0, n1, n2)` {
		t.Fatalf("remove n9: %v", err)
	}
	if _, err := report.DescribeTarget(ctx, cl, "nosuch"); !errors.As(err, &no) || err.Error() != `UNKNOWN_TARGET: no registered target "nosuch"` {
		t.Fatalf("describe target nosuch: %v", err)
	}

	// The target registry and group delete wait for the cluster version a
	// new leader commits at its first poll of the voters.
	target := &logstorepb.RegisteredTarget{Id: "t1", Address: "127.0.0.1:1", Topics: []string{"a", "b"}}
	testwait.ForErr(t, 30*time.Second, "target add past the version gate", func() error {
		done, err := report.RegisterTarget(ctx, cl, target)
		if err == nil && done != "registered target t1 at 127.0.0.1:1 (topics a,b)" {
			t.Fatalf("target add: %q", done)
		}
		return err
	})
	if l, err := report.ListTargets(ctx, cl, ""); err != nil || len(l.Targets) != 1 || l.Targets[0].ID != "t1" {
		t.Fatalf("target list: %+v, %v", l, err)
	}
	if g, err := report.Players(ctx, cl, ""); err != nil || len(g.Groups) != 0 {
		t.Fatalf("players: %+v, %v", g, err)
	}
	if done, err := report.UnregisterTarget(ctx, cl, "t1"); err != nil || done != "removed target t1" {
		t.Fatalf("target remove: %q, %v", done, err)
	}
	testwait.ForErr(t, 30*time.Second, "group delete past the version gate", func() error {
		done, err := report.DeleteGroup(ctx, cl, "billing")
		if err == nil && done != "deleted 0 committed offsets of group billing" {
			t.Fatalf("group delete: %q", done)
		}
		return err
	})

	// status: every node, one of them unreachable.
	dead := logstoretest.FreeAddr(t)
	rep, ok, lastErr := report.Collect(ctx, cl, append(c.Addrs(), dead), 2*time.Second)
	if !ok || lastErr == nil || len(rep.Nodes) != 4 || rep.Nodes[3].Error == "" || rep.Leader == "" || len(rep.Servers) != 3 || rep.Topics[0].Topic != "logs" {
		t.Fatalf("collect: %+v, %v, %v", rep, ok, lastErr)
	}
	if _, ok, lastErr := report.Collect(ctx, cl, []string{dead}, time.Second); ok || lastErr == nil {
		t.Fatalf("collect of no live node: ok %v, %v", ok, lastErr)
	}
}
