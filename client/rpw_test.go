package client_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
	"github.com/logplayer/logplayer/types"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized fault tests (0: from the clock)")

func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

const (
	rpwGroup = "upper"
	rpwIn    = "in"
	rpwOut   = "out"
)

func rpwOutput(v []byte) []byte { return []byte(strings.ToUpper(string(v))) }

// rpwInstance is one run of a read-process-write consumer: it resumes
// from the committed offset and processes batches of 1..3 messages, each
// batch's output and offset commit in one conditional transaction, until
// it has consumed `total` messages, its context ends, a condition tells it
// another instance got ahead, or die() says so at one of its steps.
func rpwInstance(ctx context.Context, cl *client.Client, total uint64, rng *rand.Rand, die func(step string) bool) error {
	if die("start") {
		return nil
	}
	p, err := cl.NewProducer(client.ProducerConfig{})
	if err != nil {
		return err
	}
	from, err := cl.CommittedOffset(ctx, rpwGroup, rpwIn)
	if err != nil || die("fetched") {
		return err
	}
	r, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: rpwIn, FromOffset: from})
	if err != nil {
		return err
	}
	defer r.Close()
	for from < types.Offset(total) {
		txn := client.NewTxn()
		n := min(types.Offset(1+rng.IntN(3)), types.Offset(total)-from)
		for range n {
			m, err := r.Next(ctx)
			if err != nil {
				return err
			}
			txn.Add(rpwOut, rpwOutput(m.Message.Value))
		}
		if die("processed") {
			return nil
		}
		txn.CommitOffset(rpwGroup, rpwIn, from+n).ExpectCommitted(rpwGroup, rpwIn, from)
		_, err := p.Append(ctx, txn)
		if errors.Is(err, client.ErrConditionFailed) {
			return nil // another instance committed first: stop, a new one resumes
		}
		if err != nil {
			return err // includes ErrInDoubt after a kill mid-append
		}
		from += n
		if die("committed") {
			return nil
		}
	}
	return nil
}

// TestReadProcessWriteExactlyOnce: a consumer turns topic "in" into topic
// "out" with its offset commit in the same conditional transaction. Its
// instances are killed at random steps (returning, or by cancelling their
// context, also in the middle of an Append, whose request may still commit
// afterwards), and some are left running beside their successor, as
// zombies. Every restart resumes from the committed offset. In the end
// "out" holds each input's output exactly once, in input order, and the
// group's committed offset is the input's length.
func TestReadProcessWriteExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	c := logstoretest.Start(t, 3, nil)
	cl := newClient(t, c.Addrs()...)
	ctx := ctxT(t, 120*time.Second)
	total := uint64(120)
	if *long {
		total = 1000
	}
	src := newProducer(t, cl, client.ProducerConfig{})
	for i := uint64(0); i < total; {
		txn := client.NewTxn()
		for j := 0; j < 10 && i < total; j, i = j+1, i+1 {
			txn.Add(rpwIn, []byte(fmt.Sprintf("message-%04d", i)))
		}
		if _, err := src.Append(ctx, txn); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	var instances, killed, zombies atomic.Int64
	errs := make(chan error, 1024)
	for {
		committed, err := cl.CommittedOffset(ctx, rpwGroup, rpwIn)
		if err != nil {
			t.Fatal(err)
		}
		if committed == types.Offset(total) {
			break
		}
		if instances.Load() > int64(20*total) {
			t.Fatalf("no progress: committed %d of %d after %d instances", committed, total, instances.Load())
		}
		instances.Add(1)
		ictx, cancel := context.WithCancel(ctx)
		irng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		var mu sync.Mutex // guards irng: die runs on the instance, the killer beside it
		die := func(string) bool {
			mu.Lock()
			defer mu.Unlock()
			if irng.IntN(12) == 0 {
				killed.Add(1)
				return true
			}
			return false
		}
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			defer cancel()
			mu.Lock()
			r := rand.New(rand.NewPCG(irng.Uint64(), 0))
			mu.Unlock()
			if err := rpwInstance(ictx, cl, total, r, die); err != nil && ictx.Err() == nil && !errors.Is(err, client.ErrInDoubt) {
				errs <- err
			}
		}()
		switch rng.IntN(4) {
		case 0: // kill by cancellation at a random moment, possibly mid-append
			time.AfterFunc(time.Duration(rng.IntN(20))*time.Millisecond, func() { killed.Add(1); cancel() })
			<-done
		case 1: // leave it running as a zombie beside the next instance
			zombies.Add(1)
		default:
			<-done
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	r, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: rpwOut, Limit: total})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range total {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := rpwOutput([]byte(fmt.Sprintf("message-%04d", i))); m.Offset != i || string(m.Message.Value) != string(want) {
			t.Fatalf("out offset %d holds %q, want %q", m.Offset, m.Message.Value, want)
		}
	}
	ts, err := cl.DescribeTopic(ctx, rpwOut) // the leader's count (Status lists only the first topics)
	if err != nil {
		t.Fatal(err)
	}
	if ts.NextOffset != total {
		t.Fatalf("out has %d messages for %d inputs: duplicates", ts.NextOffset, total)
	}
	t.Logf("%d inputs, %d instances, %d killed, %d zombies", total, instances.Load(), killed.Load(), zombies.Load())
}
