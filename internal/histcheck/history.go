package histcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// ErrMalformedOp is wrapped by the error for an operation that cannot be
// checked as recorded (a bug of the harness, not of the system under test).
var ErrMalformedOp = errors.New("histcheck: malformed operation")

// Kind says what an Op did.
type Kind uint8

const (
	// KindAppend is one Append request (one transaction).
	KindAppend Kind = iota + 1
	// KindRead is one Read of an LSN range.
	KindRead
)

// Outcome is what a client learned of its Append.
type Outcome uint8

const (
	// OK: acknowledged, with its LSN and offsets.
	OK Outcome = iota + 1
	// Failed: definitely not written (refused before or at apply).
	Failed
	// Unknown: may or may not have been written (timeout, lost
	// connection, leader change with the request in flight).
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Slice is one topic of a transaction: its first offset and how many
// messages it holds. An Append's call sets Topic and Messages; its result
// and a Read's transactions carry FirstOffset too.
type Slice struct {
	Topic       string
	FirstOffset uint64
	Messages    int
}

// Txn is a transaction as a Read returned it.
type Txn struct {
	LSN    uint64
	ID     string // the transaction's identity, as the harness wrote it
	Slices []Slice
}

// Op is one recorded operation. Times are nanoseconds on one monotonic
// clock (Recorder.Now); Return is ignored for an Append whose Outcome is
// Unknown (it may take effect until the end of the history).
type Op struct {
	Client       int
	Kind         Kind
	Call, Return int64

	// Append. ID names the transaction (unique, except that retries of one
	// idempotent-producer sequence share it). Slices are its topics with
	// their message counts; with Outcome OK their FirstOffset fields are
	// the offsets the response gave.
	ID        string
	Slices    []Slice
	Outcome   Outcome
	LSN       uint64 // the acknowledged LSN (Outcome OK)
	Duplicate bool   // answered from the producer table: LSN is the first attempt's
	// Resolved: the outcome was Unknown and Resolve settled it from the
	// final log (OK with the LSN and offsets found there, or Failed). The
	// op stays pending to the end of the history: only its effect is known.
	Resolved bool

	// Read. From and To bound the range; ToHead says the read ended at the
	// serving node's head (so Txns must reach the head at the
	// linearization point: a read that misses a committed transaction is
	// stale; To is then that head, or 0). Txns are the transactions
	// returned, LSNs From, From+1, …, To.
	From, To uint64
	ToHead   bool
	Txns     []Txn
}

// validate checks the op can be checked, and sorts slices by topic (the
// model compares them in that order).
func (o *Op) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: client %d at %d: %s", ErrMalformedOp, o.Client, o.Call, fmt.Sprintf(format, args...))
	}
	if o.Return < o.Call && !(o.Kind == KindAppend && (o.Outcome == Unknown || o.Resolved)) {
		return bad("returns at %d before its call", o.Return)
	}
	sortSlices := func(ss []Slice) error {
		slices.SortFunc(ss, func(a, b Slice) int { return strings.Compare(a.Topic, b.Topic) })
		for i, s := range ss {
			if s.Messages <= 0 {
				return bad("topic %q with %d messages", s.Topic, s.Messages)
			}
			if i > 0 && ss[i-1].Topic == s.Topic {
				return bad("topic %q twice in one transaction", s.Topic)
			}
		}
		return nil
	}
	switch o.Kind {
	case KindAppend:
		if o.ID == "" || len(o.Slices) == 0 {
			return bad("an append needs an id and slices")
		}
		if o.Outcome < OK || o.Outcome > Unknown {
			return bad("append %s: outcome %v", o.ID, o.Outcome)
		}
		if o.Outcome == OK && o.LSN == 0 {
			return bad("append %s acknowledged without an lsn", o.ID)
		}
		return sortSlices(o.Slices)
	case KindRead:
		if o.From == 0 {
			return bad("read from lsn 0")
		}
		last := o.From + uint64(len(o.Txns)) - 1
		if (!o.ToHead && (o.To < o.From || o.To != last)) || (o.ToHead && o.To != 0 && o.To != last) {
			return bad("read [%d, %d] returned %d transactions", o.From, o.To, len(o.Txns))
		}
		for i := range o.Txns {
			t := &o.Txns[i]
			if t.LSN != o.From+uint64(i) {
				return bad("read from %d: transaction %d has lsn %d", o.From, i, t.LSN)
			}
			if err := sortSlices(t.Slices); err != nil {
				return err
			}
		}
		return nil
	}
	return bad("kind %d", o.Kind)
}

// OutcomeOf classifies an Append's error by apierr.AppliedOf, the one
// answer to "did this write?": nil is OK; an error stating that nothing
// was written (not leader, queue full, an invalid request, a failed
// condition or sequence, a full table, never sent) is Failed; anything
// else, a timeout or a broken connection included, is Unknown.
func OutcomeOf(err error) Outcome {
	switch apierr.AppliedOf(err) {
	case apierr.AppliedYes:
		if err == nil {
			return OK
		}
	case apierr.AppliedNo:
		return Failed
	}
	return Unknown
}

// Resolve returns ops with every Unknown append settled by the log read
// back at the end (the whole log from LSN 1, after the last operation): an
// append whose id is in it took effect there (Outcome OK, the LSN and
// offsets found), one whose id is not did not (Failed). Its completion
// time stays unknown (Resolved). This is how Jepsen and etcd's robustness
// tests make indeterminate writes cheap to check: without it each Unknown
// is a nondeterministic step that the search may have to place anywhere
// after its call.
func Resolve(ops []Op, log []Txn) []Op {
	at := map[string]*Txn{}
	for i := range log {
		at[log[i].ID] = &log[i]
	}
	out := slices.Clone(ops)
	for i := range out {
		op := &out[i]
		if op.Kind != KindAppend || op.Outcome != Unknown {
			continue
		}
		op.Resolved = true
		t, ok := at[op.ID]
		if !ok {
			op.Outcome = Failed
			continue
		}
		op.Outcome, op.LSN = OK, t.LSN
		op.Slices = slices.Clone(op.Slices)
		for j := range op.Slices {
			for _, s := range t.Slices {
				if s.Topic == op.Slices[j].Topic {
					op.Slices[j].FirstOffset = s.FirstOffset
				}
			}
		}
	}
	return out
}

// SlicesOf returns the topics and message counts of an Append request.
func SlicesOf(req *logstorepb.AppendRequest) []Slice {
	out := make([]Slice, 0, len(req.Slices))
	for _, s := range req.Slices {
		out = append(out, Slice{Topic: s.Topic, Messages: len(s.Messages)})
	}
	return out
}

// TxnOf converts a transaction read from the log; id names it (the same
// identity the harness gave its Append).
func TxnOf(t *logstorepb.Transaction, id func(*logstorepb.Transaction) string) Txn {
	out := Txn{LSN: t.Lsn, ID: id(t), Slices: make([]Slice, 0, len(t.Slices))}
	for _, s := range t.Slices {
		out.Slices = append(out.Slices, Slice{Topic: s.Topic, FirstOffset: s.FirstOffset, Messages: len(s.Messages)})
	}
	return out
}

// Recorder collects the operations of concurrent clients on one monotonic
// clock. The zero value is not usable; call NewRecorder.
type Recorder struct {
	start time.Time
	mu    struct {
		sync.Mutex
		ops []Op
	}
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time to give as an Op's Call or Return, in nanoseconds since
// the history started (monotonic).
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Append records an Append invoked at call (from Now) that just completed
// with resp and err (OutcomeOf classifies err).
func (r *Recorder) Append(client int, id string, req *logstorepb.AppendRequest, call int64, resp *logstorepb.AppendResponse, err error) {
	op := Op{Client: client, Kind: KindAppend, Call: call, Return: r.Now(), ID: id, Slices: SlicesOf(req), Outcome: OutcomeOf(err)}
	if op.Outcome == OK {
		op.LSN, op.Duplicate = resp.Lsn, resp.Duplicate
		first := map[string]uint64{}
		for _, s := range resp.Slices {
			first[s.Topic] = s.FirstOffset
		}
		for i := range op.Slices {
			op.Slices[i].FirstOffset = first[op.Slices[i].Topic]
		}
	}
	r.Add(op)
}

// Read records a completed Read of [from, to] (toHead: it ended at the
// serving node's head) invoked at call. A failed read tells nothing and is
// not recorded.
func (r *Recorder) Read(client int, from, to uint64, toHead bool, call int64, txns []Txn) {
	r.Add(Op{Client: client, Kind: KindRead, Call: call, Return: r.Now(), From: from, To: to, ToHead: toHead, Txns: txns})
}

// Add records op as given.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.ops = append(r.mu.ops, op)
}

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.mu.ops)
}
