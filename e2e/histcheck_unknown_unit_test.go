package e2e

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
// final log (resolveUnknown, as TestNemesis does), with the same verdict. The
// mutations show each verdict depends on the outcome being unknown: the
// same history with the call taken as failed, or as acknowledged when it
// returned, is refused.
func TestUnknownOutcomes(t *testing.T) {
	l := newSeqLog()
	a := l.commit("a", "x")
	u := l.commit("u", "x")
	uAgain := histTxn{LSN: 3, ID: "u", Slices: []histSlice{{Topic: "x", FirstOffset: 2, Messages: 1}}}
	uFirst := histTxn{LSN: 1, ID: "u", Slices: []histSlice{{Topic: "x", FirstOffset: 0, Messages: 1}}}
	other := newSeqLog()
	a2, b2 := other.commit("a", "x"), other.commit("b", "x")

	for _, cause := range []error{
		context.DeadlineExceeded,
		status.Error(codes.Unavailable, "connection reset after the request was sent"),
		apierr.Status(apierr.ErrUnknownOutcome),
	} {
		if outcomeOf(cause) != outcomeUnknown {
			t.Fatalf("OutcomeOf(%v) = %v, want unknown", cause, outcomeOf(cause))
		}
		// uOp is u's Append, called at 5, that ended with cause at 15.
		uOp := unknownOp(1, 5, "u", "x")
		uOp.Return, uOp.Outcome = 15, outcomeOf(cause)
		for _, tc := range []struct {
			name string
			ops  []histOp
			log  []histTxn // the final log, for resolveUnknown
			ok   bool
			// mutate, when set, is the same history with u's outcome
			// taken as known: it must be refused.
			mutate func(op *histOp)
		}{
			{
				name: "written, and a read sees it",
				ops:  []histOp{ackedOp(0, 0, 10, a), uOp, readOp(2, 40, 50, 1, true, a, u)},
				log:  []histTxn{a, u}, ok: true,
				mutate: func(op *histOp) { op.Outcome = outcomeFailed },
			},
			{
				name: "not written, and a read to the head misses it",
				ops:  []histOp{ackedOp(0, 0, 10, a2), uOp, ackedOp(0, 20, 30, b2), readOp(2, 40, 50, 1, true, a2, b2)},
				log:  []histTxn{a2, b2}, ok: true,
				mutate: func(op *histOp) { op.Outcome, op.LSN, op.Slices[0].FirstOffset = outcomeOK, 3, 2 },
			},
			{
				name: "written twice (at most once is broken)",
				ops:  []histOp{ackedOp(0, 0, 10, a), uOp, readOp(2, 40, 50, 1, true, a, u, uAgain)},
				log:  []histTxn{a, u, uAgain},
			},
			{
				name: "written before it was called",
				ops:  []histOp{readOp(2, 0, 4, 1, false, uFirst), uOp},
				log:  []histTxn{uFirst},
			},
			{
				name: "seen by a read, then lost",
				ops:  []histOp{ackedOp(0, 0, 10, a), uOp, readOp(2, 40, 50, 1, true, a, u), readOp(2, 60, 70, 1, true, a)},
				log:  []histTxn{a},
			},
		} {
			t.Run(cause.Error()+"/"+tc.name, func(t *testing.T) {
				for _, h := range []struct {
					how string
					ops []histOp
				}{{"as recorded", tc.ops}, {"settled by the final log", resolveUnknown(tc.ops, tc.log)}} {
					rep, err := checkLinearizable(h.ops, linearizableConfig{Timeout: time.Minute})
					switch {
					case tc.ok && err != nil:
						t.Errorf("%s: %v, want linearizable", h.how, err)
					case !tc.ok && !errors.Is(err, errNotLinearizable):
						t.Errorf("%s: %v (%s), want ErrNotLinearizable", h.how, err, rep)
					}
					if rep.Unknown != 1 {
						t.Errorf("%s: %d unknown outcomes counted, want 1", h.how, rep.Unknown)
					}
				}
				if tc.mutate == nil {
					return
				}
				known := make([]histOp, len(tc.ops))
				for i, op := range tc.ops {
					op.Slices = append([]histSlice(nil), op.Slices...)
					if op.Kind == opAppend && op.ID == "u" {
						tc.mutate(&op)
					}
					known[i] = op
				}
				if _, err := checkLinearizable(known, linearizableConfig{Timeout: time.Minute}); !errors.Is(err, errNotLinearizable) {
					t.Errorf("with u's outcome taken as known: %v, want ErrNotLinearizable", err)
				}
			})
		}
	}
}
