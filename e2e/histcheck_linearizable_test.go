package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// errNotLinearizable is returned when no sequential order of the log
// explains the history.
var errNotLinearizable = errors.New("histcheck: history is not linearizable")

// errCheckTimedOut is returned when the search ran out of time before it
// decided (a history too concurrent for the model, or too long a timeout).
var errCheckTimedOut = errors.New("histcheck: linearizability check timed out")

// linearizableConfig configures checkLinearizable.
type linearizableConfig struct {
	// Timeout bounds the search; 0 means no bound.
	Timeout time.Duration
	// Visualization, when set, is the file the HTML visualization of a
	// violation is written to (porcupine's: the partial linearizations and
	// the operations that cannot be placed). Nothing is written for a
	// linearizable history.
	Visualization string
}

// linearizableReport says what checkLinearizable checked.
type linearizableReport struct {
	Result  porcupine.CheckResult
	Appends int // checked: acknowledged and unknown (definite failures have no effect and are left out)
	// Unknown counts the appends whose outcome the client did not learn: left
	// to the search, or settled by resolveUnknown either way (written: among
	// Appends; not written: NotWritten, left out like a failure).
	Unknown    int
	NotWritten int // the unknown outcomes resolveUnknown settled as not written
	Reads      int
	Elapsed    time.Duration
	// Visualization is the file written for a violation ("" if none).
	Visualization string
}

func (r linearizableReport) String() string {
	return fmt.Sprintf("%s: %d appends checked, %d unknown outcomes (%d of them settled as not written), %d reads, checked in %v",
		r.Result, r.Appends, r.Unknown, r.NotWritten, r.Reads, r.Elapsed.Round(time.Millisecond))
}

// checkLinearizable checks ops against the model log (see the top of
// histcheck_history_test.go). It returns nil when the history is
// linearizable, an error wrapping errNotLinearizable (after writing the
// visualization when configured), errCheckTimedOut, or errMalformedOp. ops
// is not modified.
func checkLinearizable(ops []histOp, cfg linearizableConfig) (linearizableReport, error) {
	began := time.Now()
	var rep linearizableReport
	hist, err := porcupineOps(ops, &rep)
	if err != nil {
		return rep, err
	}
	rep.Result = porcupine.CheckOperationsTimeout(logModel(), hist, cfg.Timeout)
	rep.Elapsed = time.Since(began)
	switch rep.Result {
	case porcupine.Ok:
		return rep, nil
	case porcupine.Unknown:
		return rep, fmt.Errorf("%w after %v (%s)", errCheckTimedOut, cfg.Timeout, rep)
	}
	err = fmt.Errorf("%w (%s)", errNotLinearizable, rep)
	if cfg.Visualization == "" {
		return rep, err
	}
	// Check again, verbosely, for the visualization: it records every
	// partial linearization, which the first pass need not pay for.
	m := logModel()
	_, info := porcupine.CheckOperationsVerbose(m, hist, cfg.Timeout)
	if verr := os.MkdirAll(filepath.Dir(cfg.Visualization), 0o755); verr != nil {
		return rep, errors.Join(err, verr)
	}
	if verr := porcupine.VisualizePath(m, info, cfg.Visualization); verr != nil {
		return rep, errors.Join(err, fmt.Errorf("visualization: %w", verr))
	}
	rep.Visualization = cfg.Visualization
	return rep, fmt.Errorf("%w (%s); visualization: %s", errNotLinearizable, rep, cfg.Visualization)
}

// porcupineOps validates ops and turns them into porcupine's history: a copy
// of each op as both input and output; failed appends left out (they have
// no effect); an unknown outcome pending until after the last event.
func porcupineOps(ops []histOp, rep *linearizableReport) ([]porcupine.Operation, error) {
	end := int64(0)
	for _, op := range ops {
		end = max(end, op.Call, op.Return)
	}
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		op.Slices = slices.Clone(op.Slices)
		op.Txns = slices.Clone(op.Txns)
		for i := range op.Txns {
			op.Txns[i].Slices = slices.Clone(op.Txns[i].Slices)
		}
		if err := op.validate(); err != nil {
			return nil, err
		}
		switch {
		case op.Kind == opRead:
			rep.Reads++
		case op.Outcome == outcomeFailed:
			if op.Resolved {
				rep.Unknown++
				rep.NotWritten++
			}
			continue
		case op.Outcome == outcomeUnknown || op.Resolved:
			rep.Appends++
			rep.Unknown++
			op.Return = end + 1
		default:
			rep.Appends++
		}
		p := &op
		hist = append(hist, porcupine.Operation{ClientId: op.Client, Input: p, Output: p, Call: op.Call, Return: op.Return})
	}
	return hist, nil
}
