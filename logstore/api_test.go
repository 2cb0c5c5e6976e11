package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func rawConn(t testing.TB, addr string) logstorepb.LogStoreClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return logstorepb.NewLogStoreClient(cc)
}

func msg(n int) *logstorepb.Message { return &logstorepb.Message{Value: make([]byte, n)} }

// TestBadInput: every bad request gets its typed error and writes nothing.
func TestBadInput(t *testing.T) {
	c := startCluster(t, 1, nil)
	ls := rawConn(t, c.Nodes[0].APIAddr())
	ok := func(topic string) *logstorepb.Slice {
		return &logstorepb.Slice{Topic: topic, Messages: []*logstorepb.Message{msg(1)}}
	}
	for _, tc := range []struct {
		name string
		req  *logstorepb.AppendRequest
		code codes.Code
		ec   logstorepb.ErrorCode
	}{
		{"empty txn", &logstorepb.AppendRequest{}, codes.InvalidArgument, logstorepb.ErrorCode_EMPTY_TRANSACTION},
		{"slice without messages", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "a"}}}, codes.InvalidArgument, logstorepb.ErrorCode_EMPTY_TRANSACTION},
		{"empty topic", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("")}}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_TOPIC},
		{"bad char topic", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("a/b")}}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_TOPIC},
		{"long topic", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok(strings.Repeat("x", 250))}}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_TOPIC},
		{"duplicate topic", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("a"), ok("b"), ok("a")}}, codes.InvalidArgument, logstorepb.ErrorCode_DUPLICATE_TOPIC},
		{"message too large", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{msg(1<<20 + 1)}}}}, codes.InvalidArgument, logstorepb.ErrorCode_MESSAGE_TOO_LARGE},
		{"request too large", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{msg(1 << 20), msg(1 << 20), msg(1 << 20), msg(1 << 20)}}}}, codes.InvalidArgument, logstorepb.ErrorCode_REQUEST_TOO_LARGE},
		{"producer without sequence", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("a")}, ProducerId: "p"}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"sequence without producer", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("a")}, Sequence: 3}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"condition bad topic", &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("a")}, Conditions: []*logstorepb.Condition{{Topic: "no way"}}}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_TOPIC},
		{"offset commit without group", &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Topic: "a"}}}, codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ls.Append(ctxT(t, 30*time.Second), tc.req)
			if status.Code(err) != tc.code || apierr.CodeOf(err) != tc.ec {
				t.Fatalf("got %v / %v, want %v / %v", status.Code(err), apierr.CodeOf(err), tc.code, tc.ec)
			}
			// Inside an AppendBatch the request gets the same error.
			resp, err := ls.AppendBatch(ctxT(t, 30*time.Second), &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{tc.req}})
			if err != nil || len(resp.Results) != 1 || resp.Results[0].Error == nil {
				t.Fatalf("batch: %v %v", resp, err)
			}
			if berr := apierr.Decode(resp.Results[0].Error); status.Code(berr) != tc.code || apierr.CodeOf(berr) != tc.ec {
				t.Fatalf("batch got %v / %v, want %v / %v", status.Code(berr), apierr.CodeOf(berr), tc.code, tc.ec)
			}
		})
	}
	if h := c.Nodes[0].HeadLSN(); h != 0 {
		t.Fatalf("bad input wrote: head %d", h)
	}
	// A condition on a topic outside the txn is fine.
	resp, err := ls.Append(ctxT(t, 30*time.Second), &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{ok("a")},
		Conditions: []*logstorepb.Condition{{Topic: "other", ExpectedNextOffset: 0}}})
	if err != nil || resp.Lsn != 1 {
		t.Fatalf("condition on other topic: %v %v", resp, err)
	}
	// Bad reads.
	for name, req := range map[string]*logstorepb.ReadRequest{
		"from 0":     {FromLsn: 0},
		"to < from":  {FromLsn: 5, ToLsn: 2},
		"bad filter": {FromLsn: 1, Topics: []string{"a b"}},
	} {
		st, err := ls.Read(ctxT(t, 30*time.Second), req)
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("read %s: %v", name, err)
		}
	}
}

// TestBadInputNewCodes extends TestBadInput with the refusals that need
// state (issue #12): a kv topic, registered producers, a full topic
// table. Each row asserts the gRPC code and the ErrorDetail code, through
// Append and (for Appends) inside an AppendBatch, and that nothing
// changed: the head LSN, every topic's next offset, the topic count, and
// (checked at the end) the producers' next sequences.
func TestBadInputNewCodes(t *testing.T) {
	const maxTopics, maxDecls = 8, 1
	c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.MaxTopics, cfg.MaxTopicDeclarations = maxTopics, maxDecls })
	waitClusterVersion(t, c, fsm.CurrentVersion)
	ls := rawConn(t, c.Nodes[0].APIAddr())
	ctx := ctxT(t, 60*time.Second)
	one := func(topic, value string) []*logstorepb.Slice {
		return []*logstorepb.Slice{{Topic: topic, Messages: []*logstorepb.Message{{Value: []byte(value)}}}}
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := ls.CreateTopic(ctx, kvDecl("kv", ""))
	must("CreateTopic kv", err)
	p, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "p"})
	must("InitProducer p", err)
	reg := func(id string, epoch, seq uint64, value string) *logstorepb.AppendRequest {
		return &logstorepb.AppendRequest{Slices: one("a", value), ProducerId: id, ProducerEpoch: epoch, Sequence: seq}
	}
	var lsn6 uint64
	for seq := uint64(1); seq <= 6; seq++ { // the window now holds 2..6
		r, err := ls.Append(ctx, reg(p.ProducerId, p.Epoch, seq, fmt.Sprint("p-", seq)))
		must("producer append", err)
		lsn6 = r.Lsn
	}
	zombie, err := ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "z"})
	must("InitProducer z", err)
	_, err = ls.InitProducer(ctx, &logstorepb.InitProducerRequest{Name: "z"}) // fences epoch 1
	must("InitProducer z again", err)
	topics := func() (map[string]uint64, uint64) {
		t.Helper()
		out := map[string]uint64{}
		var count uint64
		for tok := ""; ; {
			r, err := ls.ListTopics(ctx, &logstorepb.ListTopicsRequest{PageToken: tok, Leader: true})
			must("ListTopics", err)
			if tok == "" {
				count = r.TopicCount
			}
			for _, ti := range r.Topics {
				out[ti.Topic] = ti.NextOffset
			}
			if tok = r.NextPageToken; tok == "" {
				return out, count
			}
		}
	}
	written := func() (n int) { // the topic table's cap counts written topics (not "kv", declared only)
		all, _ := topics()
		for _, next := range all {
			if next > 0 {
				n++
			}
		}
		return n
	}
	for i := 0; written() < maxTopics; i++ { // fill the topic table to its cap
		_, err := ls.Append(ctx, &logstorepb.AppendRequest{Slices: one(fmt.Sprint("fill-", i), "x")})
		must("fill", err)
	}
	big := &logstorepb.Slice{Topic: "a"}
	for range 5 {
		big.Messages = append(big.Messages, msg(1<<20))
	}
	for _, tc := range []struct {
		name   string
		append *logstorepb.AppendRequest // sent through Append and AppendBatch
		call   func() error              // or this
		code   codes.Code
		ec     logstorepb.ErrorCode
	}{
		{name: "schema mismatch", append: &logstorepb.AppendRequest{Slices: one("kv", "hi")}, code: codes.InvalidArgument, ec: logstorepb.ErrorCode_SCHEMA_MISMATCH},
		{name: "unknown producer", append: reg("999", 1, 1, "ghost"), code: codes.FailedPrecondition, ec: logstorepb.ErrorCode_UNKNOWN_PRODUCER},
		{name: "producer fenced", append: reg(zombie.ProducerId, zombie.Epoch, 1, "zombie"), code: codes.FailedPrecondition, ec: logstorepb.ErrorCode_PRODUCER_FENCED},
		{name: "sequence too old", append: reg(p.ProducerId, p.Epoch, 1, "p-1"), code: codes.FailedPrecondition, ec: logstorepb.ErrorCode_SEQUENCE_TOO_OLD},
		{name: "sequence reused", append: reg(p.ProducerId, p.Epoch, 6, "other"), code: codes.FailedPrecondition, ec: logstorepb.ErrorCode_SEQUENCE_REUSED},
		{name: "sequence gap", append: reg(p.ProducerId, p.Epoch, 9, "gap"), code: codes.FailedPrecondition, ec: logstorepb.ErrorCode_SEQUENCE_MISMATCH},
		{name: "topic table full", append: &logstorepb.AppendRequest{Slices: one("one-too-many", "x")}, code: codes.ResourceExhausted, ec: logstorepb.ErrorCode_TABLE_FULL},
		{name: "topic declarations full", call: func() error {
			_, err := ls.CreateTopic(ctx, kvDecl("", "shard-*"))
			return err
		}, code: codes.ResourceExhausted, ec: logstorepb.ErrorCode_TABLE_FULL},
		{name: "request too large at the edge", call: func() error { // above the gRPC receive limit
			_, err := ls.Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{big}})
			return err
		}, code: codes.InvalidArgument, ec: logstorepb.ErrorCode_REQUEST_TOO_LARGE},
		{name: "unknown topic", call: func() error {
			st, err := ls.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: "never"})
			if err == nil {
				_, err = st.Recv()
			}
			return err
		}, code: codes.NotFound, ec: logstorepb.ErrorCode_UNKNOWN_TOPIC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := c.Nodes[0].HeadLSN()
			before, count := topics()
			check := func(via string, err error) {
				t.Helper()
				if status.Code(err) != tc.code || apierr.CodeOf(err) != tc.ec {
					t.Fatalf("%s: %v (%v / %v), want %v / %v", via, err, status.Code(err), apierr.CodeOf(err), tc.code, tc.ec)
				}
			}
			if tc.call != nil {
				check("call", tc.call())
			} else {
				_, err := ls.Append(ctx, tc.append)
				check("Append", err)
				resp, err := ls.AppendBatch(ctx, &logstorepb.AppendBatchRequest{Requests: []*logstorepb.AppendRequest{tc.append}})
				if err != nil || len(resp.Results) != 1 || resp.Results[0].Error == nil {
					t.Fatalf("batch: %v %v", resp, err)
				}
				check("AppendBatch", apierr.Decode(resp.Results[0].Error))
			}
			after, count2 := topics()
			if h := c.Nodes[0].HeadLSN(); h != head || count2 != count || !maps.Equal(before, after) {
				t.Fatalf("refusal changed the state: head %d -> %d, topics %d %v -> %d %v", head, h, count, before, count2, after)
			}
		})
	}
	// The producer rows are as they were: p's next sequence is 7 (checked
	// first: a retry of 7 would then be the duplicate), and its sequence 6
	// still answers with its first result.
	head := c.Nodes[0].HeadLSN()
	r, err := ls.Append(ctx, reg(p.ProducerId, p.Epoch, 7, "p-7"))
	if err != nil || r.Lsn != uint64(head)+1 || r.Duplicate {
		t.Fatalf("p sequence 7 after the refusals: %v %v, want lsn %d", r, err, head+1)
	}
	if r, err := ls.Append(ctx, reg(p.ProducerId, p.Epoch, 6, "p-6")); err != nil || !r.Duplicate || r.Lsn != lsn6 {
		t.Fatalf("p sequence 6 retry: %v %v, want lsn %d duplicate", r, err, lsn6)
	}
}

func TestIdempotentRetryAndSequenceGap(t *testing.T) {
	c := startCluster(t, 3, allowLegacyProducers)
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 60*time.Second)
	req := txnReq("p1", "a", "b")
	req.ProducerId, req.Sequence = "producer-1", 1
	first, err := cl.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cl.Append(ctx, req)
	if err != nil || !again.Duplicate || again.Lsn != first.Lsn || again.Slices[1].FirstOffset != first.Slices[1].FirstOffset {
		t.Fatalf("retry = %v, %v; want first result %v", again, err, first)
	}
	req.Sequence = 3
	_, err = cl.Append(ctx, req)
	if d := apierr.Detail(err); status.Code(err) != codes.FailedPrecondition || d.GetCode() != logstorepb.ErrorCode_SEQUENCE_MISMATCH || d.ExpectedSequence != 2 {
		t.Fatalf("gap: %v (detail %v)", err, d)
	}
	if h := c.waitLeader().HeadLSN(); h != 1 {
		t.Fatalf("head %d after one write and a retry, want 1", h)
	}
}

func TestFollowerAnswersNotLeaderWithAddress(t *testing.T) {
	c := startCluster(t, 3, nil)
	leader := c.waitLeader()
	cl := newClient(t, c.addrs()...)
	if _, err := cl.Append(ctxT(t, 30*time.Second), txnReq("warm", "a")); err != nil {
		t.Fatal(err) // also waits for member registration to commit
	}
	for _, n := range c.Nodes {
		if n == leader {
			continue
		}
		var err error
		testwait.For(t, 30*time.Second, "follower knows the leader's address", func() bool {
			_, err = rawConn(t, n.APIAddr()).Append(ctxT(t, 10*time.Second), txnReq("x", "a"))
			return apierr.Detail(err).GetLeaderAddress() != ""
		})
		d := apierr.Detail(err)
		if status.Code(err) != codes.Unavailable || d.Code != logstorepb.ErrorCode_NOT_LEADER || d.LeaderAddress != leader.APIAddr() || d.LeaderId != leader.ID() {
			t.Fatalf("follower %s: %v detail %v", n.ID(), err, d)
		}
	}
	// A client seeded with a follower only still writes through the leader.
	for _, n := range c.Nodes {
		if n != leader {
			if _, err := newClient(t, n.APIAddr()).Append(ctxT(t, 30*time.Second), txnReq("via", "a")); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
}

func TestConditionalAppendRace(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl := newClient(t, c.addrs()...)
	const writers, rounds = 6, 15
	var mu sync.Mutex
	won := map[uint64]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxT(t, 120*time.Second)
			expected := uint64(0)
			for {
				mu.Lock()
				done := len(won) >= rounds
				mu.Unlock()
				if done {
					return
				}
				req := txnReq(fmt.Sprintf("w%d@%d", w, expected), "es")
				req.Conditions = []*logstorepb.Condition{{Topic: "es", ExpectedNextOffset: expected}}
				resp, err := cl.Append(ctx, req)
				if d := apierr.Detail(err); d.GetCode() == logstorepb.ErrorCode_CONDITION_FAILED {
					expected = d.ActualNextOffset
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, ok := won[resp.Slices[0].FirstOffset]; ok {
					t.Errorf("offset %d won twice: %s and w%d", resp.Slices[0].FirstOffset, prev, w)
				}
				won[resp.Slices[0].FirstOffset] = fmt.Sprintf("w%d", w)
				mu.Unlock()
				expected = resp.Slices[0].FirstOffset + 1
			}
		}()
	}
	wg.Wait()
	for off := range uint64(len(won)) {
		if _, ok := won[off]; !ok {
			t.Fatalf("offset %d has no winner (gap); winners %v", off, won)
		}
	}
}

func TestOffsetsCommitAndFetch(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl := newClient(t, c.addrs()...)
	ctx := ctxT(t, 60*time.Second)
	req := txnReq("out", "b")
	req.OffsetCommits = []*logstorepb.OffsetCommit{{Group: "g1", Topic: "a", Offset: 10}}
	if _, err := cl.Append(ctx, req); err != nil {
		t.Fatal(err)
	}
	only, err := cl.Append(ctx, &logstorepb.AppendRequest{OffsetCommits: []*logstorepb.OffsetCommit{{Group: "g1", Topic: "c", Offset: 3}}})
	if err != nil || only.Lsn != 2 {
		t.Fatalf("offsets-only txn: %v %v", only, err)
	}
	got, err := cl.FetchOffsets(ctx, "g1")
	if err != nil || len(got) != 2 || got[0].Topic != "a" || got[0].Offset != 10 || got[1].Offset != 3 {
		t.Fatalf("fetch = %v %v", got, err)
	}
	got, err = cl.FetchOffsets(ctx, "g1", "c")
	if err != nil || len(got) != 1 || got[0].Topic != "c" {
		t.Fatalf("fetch c = %v %v", got, err)
	}
	e1, err1 := cl.NextEpoch(ctx)
	e2, err2 := cl.NextEpoch(ctx)
	if errors.Join(err1, err2) != nil || e2 <= e1 || e1 == 0 {
		t.Fatalf("epochs %d %d (%v %v)", e1, e2, err1, err2)
	}
	// DeleteGroup removes the group's offsets on every node (once every
	// voter advertised the version it needs); a bad name is refused and
	// changes nothing.
	waitClusterVersion(t, c, fsm.CurrentVersion)
	if _, err := cl.DeleteGroup(ctx, ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("delete of an invalid group name: %v", err)
	}
	headBefore := c.waitLeader().HeadLSN()
	if n, err := cl.DeleteGroup(ctx, "g1"); err != nil || n != 2 {
		t.Fatalf("delete g1 = %d, %v; want 2 removed", n, err)
	}
	if got, err := cl.FetchOffsets(ctx, "g1"); err != nil || len(got) != 0 {
		t.Fatalf("fetch after delete = %v %v", got, err)
	}
	for _, n := range c.Nodes {
		// A follower that has not applied the offset commits yet has no
		// rows either: wait for the commits (the head before the delete)
		// and then for the rows to go.
		testwait.For(t, 30*time.Second, "every node applied the delete", func() bool {
			return n.HeadLSN() >= headBefore && logstore.GroupOffsetRowsForTest(n) == 0
		})
		if n.HeadLSN() != headBefore {
			t.Fatalf("node %s head %d, %d before DeleteGroup: DeleteGroup wrote a transaction", n.ID(), n.HeadLSN(), headBefore)
		}
	}
}

// TestAtomicVisibility: readers during writes never see part of a txn.
func TestAtomicVisibility(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl := newClient(t, c.addrs()...)
	topics := []string{"x", "y", "z"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	readErr := make(chan error, 8)
	check := func(txn *logstorepb.Transaction) error {
		if len(txn.Slices) != len(topics) {
			return fmt.Errorf("lsn %d has %d slices", txn.Lsn, len(txn.Slices))
		}
		for _, s := range txn.Slices {
			if string(s.Messages[0].Value) != string(txn.Slices[0].Messages[0].Value) {
				return fmt.Errorf("lsn %d mixes txn ids", txn.Lsn)
			}
		}
		return nil
	}
	// The topics exist before the readers start (a ReadTopic of a topic
	// never written is UNKNOWN_TOPIC) on every node.
	if _, err := cl.Append(ctx, txnReq("first", topics...)); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		testwait.For(t, 30*time.Second, "every node applied the first txn", func() bool { return n.HeadLSN() >= 1 })
	}
	seen := make([]atomic.Uint64, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Add(2)
		go func() { // LSN reader, filtered to two of three topics
			defer wg.Done()
			ls := rawConn(t, n.APIAddr())
			st, err := ls.Read(ctx, &logstorepb.ReadRequest{FromLsn: 1})
			if err != nil {
				readErr <- err
				return
			}
			for {
				r, err := st.Recv()
				if err != nil {
					if status.Code(err) != codes.Canceled {
						readErr <- err
					}
					return
				}
				for _, txn := range r.Transactions {
					if err := check(txn); err != nil {
						readErr <- err
						return
					}
				}
				seen[i].Store(r.ReadThroughLsn)
			}
		}()
		go func() { // topic reader: every message's txn must be whole at once
			defer wg.Done()
			ls := rawConn(t, n.APIAddr())
			st, err := ls.ReadTopic(ctx, &logstorepb.ReadTopicRequest{Topic: "y", Follow: true})
			if err != nil {
				readErr <- err
				return
			}
			for {
				r, err := st.Recv()
				if err != nil {
					if status.Code(err) != codes.Canceled {
						readErr <- err
					}
					return
				}
				m := r.Messages[len(r.Messages)-1]
				rs, err := ls.Read(ctx, &logstorepb.ReadRequest{FromLsn: m.Lsn, ToLsn: m.Lsn})
				if err != nil {
					if status.Code(err) != codes.Canceled {
						readErr <- err
					}
					return
				}
				one, err := rs.Recv()
				if err != nil {
					if status.Code(err) != codes.Canceled { // the test ended while this read was in flight
						readErr <- fmt.Errorf("read lsn %d after its topic message: %w", m.Lsn, err)
					}
					return
				}
				if err := check(one.Transactions[0]); err != nil {
					readErr <- err
					return
				}
			}
		}()
	}
	var wwg sync.WaitGroup
	for w := range 8 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := range 40 {
				if _, err := cl.Append(ctx, txnReq(fmt.Sprintf("%d-%d", w, i), topics...)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wwg.Wait()
	for i := range c.Nodes {
		testwait.For(t, 60*time.Second, "readers reach the end", func() bool { return seen[i].Load() >= 321 })
	}
	cancel()
	wg.Wait()
	close(readErr)
	for err := range readErr {
		t.Error(err)
	}
}

func TestReadBelowRetentionAndBeyondHead(t *testing.T) {
	c := startCluster(t, 1, func(cfg *logstore.Config) {
		cfg.SegmentBytes = 4 << 10
		cfg.RetentionBytes, cfg.RetentionAge = 1, time.Hour
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 20, 10, 50*time.Millisecond
	})
	n := c.Nodes[0]
	cl := newClient(t, n.APIAddr())
	ctx := ctxT(t, 60*time.Second)
	for i := range 200 {
		if _, err := cl.Append(ctx, txnReq(fmt.Sprintf("%04d", i)+strings.Repeat("p", 100), "a", "b")); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 60*time.Second, "retention deletes the oldest segments", func() bool {
		_, err := n.RunRetention()
		return err == nil && n.SegmentLog().FirstLSN() > 1
	})
	first := uint64(n.SegmentLog().FirstLSN())
	st, err := rawConn(t, n.APIAddr()).Read(ctx, &logstorepb.ReadRequest{FromLsn: 1})
	if err == nil {
		_, err = st.Recv()
	}
	if d := apierr.Detail(err); status.Code(err) != codes.OutOfRange || d.GetCode() != logstorepb.ErrorCode_BELOW_RETENTION || d.OldestLsn != first {
		t.Fatalf("read below retention: %v detail %v (first %d)", err, d, first)
	}
	// Beyond the head a read waits, then gets the txn when it commits.
	head := uint64(n.HeadLSN())
	got := make(chan *logstorepb.ReadResponse, 1)
	go func() {
		st, err := rawConn(t, n.APIAddr()).Read(ctx, &logstorepb.ReadRequest{FromLsn: head + 1, ToLsn: head + 1})
		if err != nil {
			close(got)
			return
		}
		r, err := st.Recv()
		if err != nil {
			close(got)
			return
		}
		got <- r
	}()
	select {
	case r := <-got:
		t.Fatalf("read beyond head returned before a write: %v", r)
	default:
	}
	if _, err := cl.Append(ctx, txnReq("late", "a")); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r == nil || r.ReadThroughLsn != head+1 || len(r.Transactions) != 1 {
		t.Fatalf("waiting read got %v", r)
	}
}
