package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Unknown outcomes. The workload's Appends carry a producer id, so the
// client retries them inside one call until its deadline and the history
// would hold almost only acknowledgements. TestNemesis gives every recorded
// call a short deadline instead (drawn in [callDeadlineMin,
// callDeadlineMax]): an Append in flight when the nemesis kills, pauses or
// isolates the leader ends with DeadlineExceeded (or Unavailable, or
// UNKNOWN_OUTCOME) after it was sent, an unknown outcome; the workload
// retries it with the same producer sequence (answered from the producer
// table, or written then). The prober adds Appends without a producer id,
// which neither the client nor anyone retries: an unknown outcome there may
// or may not be in the log and must be there at most once, with nothing
// but Raft to keep that promise. resolveUnknown settles each from the
// final log, checkLinearizable places it, and ackViolations (in checkAcks)
// finds any id in the log twice.
const (
	callDeadlineMin = 250 * time.Millisecond
	callDeadlineMax = 2 * time.Second
)

// probeTopic is the prober's topic (no target subscribes to it).
const probeTopic = "nemesis-probe"

// probeClient is the prober's client id in the history (above the
// readers').
const probeClient = 2000

// probeEvery paces the prober (probeSoakEvery in the soak).
const (
	probeEvery     = 20 * time.Millisecond
	probeSoakEvery = 100 * time.Millisecond
)

// deadlines draws the recorded calls' deadlines from the seed (the draws'
// order follows the goroutines' interleaving, so they replay only roughly).
type deadlines struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func newDeadlines(seed uint64) *deadlines {
	return &deadlines{rng: rand.New(rand.NewPCG(seed, 0xdead11e5))}
}

// next is a deadline in [callDeadlineMin, callDeadlineMax].
func (d *deadlines) next() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return callDeadlineMin + time.Duration(d.rng.Int64N(int64(callDeadlineMax-callDeadlineMin)+1))
}

// inFlight counts the recorded Appends in flight, so that the nemesis can
// say how many calls each cut interrupted.
type inFlight struct{ n atomic.Int64 }

func (f *inFlight) enter()     { f.n.Add(1) }
func (f *inFlight) leave()     { f.n.Add(-1) }
func (f *inFlight) now() int64 { return f.n.Load() }

// prober appends one-message transactions without a producer id until
// stopped, each with a short deadline, recording them as client
// probeClient.
type prober struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// startProber starts the prober on c's client; every is its pace.
func startProber(c *cluster, hist *histRecorder, dl *deadlines, fl *inFlight, every time.Duration) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel}
	p.wg.Go(func() {
		tk := time.NewTicker(every)
		defer tk.Stop()
		for k := 1; ctx.Err() == nil; k++ {
			id := fmt.Sprintf("probe-%d", k)
			req := &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: probeTopic,
				Messages: []*logstorepb.Message{{Key: []byte(id), Value: []byte(id)}}}}}
			cctx, ccancel := context.WithTimeout(ctx, dl.next())
			fl.enter()
			call := hist.Now()
			resp, err := c.client.Append(cctx, req)
			fl.leave()
			ccancel()
			// Stopped mid-call, it is recorded too: an unknown outcome
			// like any other.
			hist.Append(probeClient, id, req, call, resp, err)
			select {
			case <-tk.C:
			case <-ctx.Done():
			}
		}
	})
	return p
}

// stop ends the prober (idempotent).
func (p *prober) stop() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
	})
}

// outcomeCounts counts a history's Appends by outcome as the clients saw
// them (before resolveUnknown), the prober's apart, and how resolveUnknown
// settled the unknown ones.
type outcomeCounts struct {
	ok, failed, unknown                int // every recorded Append
	probeOK, probeFailed, probeUnknown int // the prober's among them
	unknownInLog, unknownNotInLog      int // the unknown ones, settled by the final log
	reads                              int
}

// countOutcomes counts raw (the recorded history) against resolved (the
// same ops after oneEffectPerID and resolveUnknown; matched by client,
// call and id).
func countOutcomes(raw, resolved []histOp) outcomeCounts {
	var c outcomeCounts
	type key struct {
		client int
		call   int64
		id     string
	}
	settled := map[key]histOp{}
	for _, op := range resolved {
		if op.Kind == opAppend {
			settled[key{op.Client, op.Call, op.ID}] = op
		}
	}
	for _, op := range raw {
		if op.Kind == opRead {
			c.reads++
			continue
		}
		probe := op.Client == probeClient
		switch op.Outcome {
		case outcomeOK:
			c.ok++
			if probe {
				c.probeOK++
			}
		case outcomeFailed:
			c.failed++
			if probe {
				c.probeFailed++
			}
		case outcomeUnknown:
			c.unknown++
			if probe {
				c.probeUnknown++
			}
			if s, ok := settled[key{op.Client, op.Call, op.ID}]; ok && s.Outcome == outcomeOK {
				c.unknownInLog++
			} else {
				c.unknownNotInLog++
			}
		}
	}
	return c
}

func (c outcomeCounts) String() string {
	return fmt.Sprintf("appends ok=%d failed=%d unknown=%d (of them the prober's, no producer id: ok=%d failed=%d unknown=%d); "+
		"unknown outcomes settled by the log: %d written, %d not (or a retry's effect); %d reads",
		c.ok, c.failed, c.unknown, c.probeOK, c.probeFailed, c.probeUnknown, c.unknownInLog, c.unknownNotInLog, c.reads)
}
