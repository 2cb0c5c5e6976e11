package histcheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
)

// TestUnknownOutcomes checks the three ways a client learns nothing of its
// Append (its deadline, a connection lost after the request went out, the
// server's UNKNOWN_OUTCOME) against histories where the write did and did
// not happen, and where it happened wrongly; each history is checked as
// recorded (the unknown outcome left to the search) and settled by the
// final log (Resolve, as TestNemesis does), with the same verdict. The
// mutations show each verdict depends on the outcome being unknown: the
// same history with the call taken as failed, or as acknowledged when it
// returned, is refused.
func TestUnknownOutcomes(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	u := l.commit("u", "x")
	uAgain := Txn{LSN: 3, ID: "u", Slices: []Slice{{Topic: "x", FirstOffset: 2, Messages: 1}}}
	uFirst := Txn{LSN: 1, ID: "u", Slices: []Slice{{Topic: "x", FirstOffset: 0, Messages: 1}}}
	other := newSeqLog()
	a2, b2 := other.commit("a", "x"), other.commit("b", "x")

	for _, cause := range []error{
		context.DeadlineExceeded,
		status.Error(codes.Unavailable, "connection reset after the request was sent"),
		apierr.Status(apierr.ErrUnknownOutcome),
	} {
		if OutcomeOf(cause) != Unknown {
			t.Fatalf("OutcomeOf(%v) = %v, want unknown", cause, OutcomeOf(cause))
		}
		// uOp is u's Append, called at 5, that ended with cause at 15.
		uOp := unknown(1, 5, "u", "x")
		uOp.Return, uOp.Outcome = 15, OutcomeOf(cause)
		for _, tc := range []struct {
			name string
			ops  []Op
			log  []Txn // the final log, for Resolve
			ok   bool
			// mutate, when set, is the same history with u's outcome
			// taken as known: it must be refused.
			mutate func(op *Op)
		}{
			{
				name: "written, and a read sees it",
				ops:  []Op{acked(0, 0, 10, a), uOp, read(2, 40, 50, 1, true, a, u)},
				log:  []Txn{a, u}, ok: true,
				mutate: func(op *Op) { op.Outcome = Failed },
			},
			{
				name: "not written, and a read to the head misses it",
				ops:  []Op{acked(0, 0, 10, a2), uOp, acked(0, 20, 30, b2), read(2, 40, 50, 1, true, a2, b2)},
				log:  []Txn{a2, b2}, ok: true,
				mutate: func(op *Op) { op.Outcome, op.LSN, op.Slices[0].FirstOffset = OK, 3, 2 },
			},
			{
				name: "written twice (at most once is broken)",
				ops:  []Op{acked(0, 0, 10, a), uOp, read(2, 40, 50, 1, true, a, u, uAgain)},
				log:  []Txn{a, u, uAgain},
			},
			{
				name: "written before it was called",
				ops:  []Op{read(2, 0, 4, 1, false, uFirst), uOp},
				log:  []Txn{uFirst},
			},
			{
				name: "seen by a read, then lost",
				ops:  []Op{acked(0, 0, 10, a), uOp, read(2, 40, 50, 1, true, a, u), read(2, 60, 70, 1, true, a)},
				log:  []Txn{a},
			},
		} {
			t.Run(cause.Error()+"/"+tc.name, func(t *testing.T) {
				for _, h := range []struct {
					how string
					ops []Op
				}{{"as recorded", tc.ops}, {"settled by the final log", Resolve(tc.ops, tc.log)}} {
					rep, err := CheckLinearizable(h.ops, LinearizableConfig{Timeout: time.Minute})
					switch {
					case tc.ok && err != nil:
						t.Errorf("%s: %v, want linearizable", h.how, err)
					case !tc.ok && !errors.Is(err, ErrNotLinearizable):
						t.Errorf("%s: %v (%s), want ErrNotLinearizable", h.how, err, rep)
					}
					if rep.Unknown != 1 {
						t.Errorf("%s: %d unknown outcomes counted, want 1", h.how, rep.Unknown)
					}
				}
				if tc.mutate == nil {
					return
				}
				known := make([]Op, len(tc.ops))
				for i, op := range tc.ops {
					op.Slices = append([]Slice(nil), op.Slices...)
					if op.Kind == KindAppend && op.ID == "u" {
						tc.mutate(&op)
					}
					known[i] = op
				}
				if _, err := CheckLinearizable(known, LinearizableConfig{Timeout: time.Minute}); !errors.Is(err, ErrNotLinearizable) {
					t.Errorf("with u's outcome taken as known: %v, want ErrNotLinearizable", err)
				}
			})
		}
	}
}
