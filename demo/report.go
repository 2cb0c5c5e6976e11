package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/logplayer/logplayer/internal/quantile"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// CheckConfig says what to check after a workload Run.
type CheckConfig struct {
	// Log reads the committed log.
	Log LogReader
	// After is the head LSN before the run; Through the head LSN after it
	// (at least the highest acknowledged LSN). The delivery audit covers
	// (After, Through]; the state check replays the log from LSN 1.
	After, Through uint64
	// Shards maps each shard target id to its client; shard target "shard-N"
	// subscribes to topic "shard-N". Every shard's final state is compared
	// with the model; a shard not in Recorded is audited by position
	// (MethodPosition).
	Shards map[string]shardpb.ShardClient
	// Recorder saw the run: WatchApplied fed it every shard's applied LSN
	// (for apply latencies), and RecordingStores every apply of the targets
	// in Recorded (target id -> topics), which are audited per apply
	// (MethodPerApply).
	Recorder *Recorder
	Recorded map[string][]string
	// CatchUp bounds the wait for every target to apply the run's last
	// transaction for its topics.
	CatchUp time.Duration
}

// Report is the outcome of a run and its check.
type Report struct {
	Committed int     `json:"committed"` // acknowledged transactions
	LogTxns   int     `json:"log_txns"`  // transactions in the log in the audit range
	TxPerSec  float64 `json:"tx_per_sec"`
	Retries   int     `json:"retries"`
	// Expected, Delivered, Duplicates and Missing count messages at the
	// targets (see TargetAudit), summed over targets.
	Expected   int `json:"expected"`
	Delivered  int `json:"delivered"`
	Duplicates int `json:"duplicates"`
	Missing    int `json:"missing"`
	// StateMismatches counts shard keys that differ from the model built
	// from the log (missing, wrong value or unexpected).
	StateMismatches int `json:"state_mismatches"`
	// LogDuplicates counts ids written twice to the log.
	LogDuplicates int `json:"log_duplicates"`
	// AckedNotInLog counts acknowledged appends whose transaction is not
	// at the acknowledged LSN in the log read back.
	AckedNotInLog int     `json:"acked_not_in_log"`
	CommitP50Ms   float64 `json:"commit_p50_ms"`
	CommitP99Ms   float64 `json:"commit_p99_ms"`
	ApplyP50Ms    float64 `json:"apply_p50_ms"`
	ApplyP99Ms    float64 `json:"apply_p99_ms"`
	OK            bool    `json:"ok"`

	Targets []TargetAudit `json:"-"`
	Shards  []ShardCheck  `json:"-"`
	Notes   []string      `json:"-"`
}

// ShardCheck is one shard's final state against the model.
type ShardCheck struct {
	Target     string
	AppliedLSN uint64
	Diff       StateDiff
}

// Check waits for delivery to catch up, then audits delivery and shard state
// against the log. The returned Report's OK is false if anything is missing,
// duplicated or different; an error means the check itself could not run.
func Check(ctx context.Context, cfg CheckConfig, res *Result) (*Report, error) {
	m := NewModel()
	if err := ReadLog(ctx, cfg.Log, 1, cfg.Through, m.Apply); err != nil {
		return nil, err
	}
	rep := &Report{Committed: res.Committed, Retries: res.Retries, LogDuplicates: m.LogDuplicates(), AckedNotInLog: m.AckedNotInLog(res.Acked)}
	rep.LogTxns = int(cfg.Through - cfg.After)
	if res.Elapsed > 0 {
		rep.TxPerSec = math.Round(float64(res.Committed)/res.Elapsed.Seconds()*10) / 10
	}

	waitCtx, cancel := context.WithTimeout(ctx, cfg.CatchUp)
	defer cancel()
	subs := map[string][]string{}
	ids := make([]string, 0, len(cfg.Shards))
	for id := range cfg.Shards {
		ids = append(ids, id)
		subs[id] = []string{id}
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := cfg.Shards[id]
		if _, err := WaitApplied(waitCtx, c, m.LastLSNOf(id, cfg.Through)); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s did not catch up: %v", id, err))
		}
		kv, lsn, err := ScanAll(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		if err := getMissing(ctx, c, m.State(id), kv); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		sc := ShardCheck{Target: id, AppliedLSN: lsn, Diff: m.CompareShard(id, kv)}
		rep.StateMismatches += sc.Diff.Missing + sc.Diff.Wrong + sc.Diff.Unexpected
		rep.Shards = append(rep.Shards, sc)
		if _, perApply := cfg.Recorded[id]; !perApply {
			rep.Targets = append(rep.Targets, positionAudit(m, sc, cfg.After, cfg.Through))
		}
	}
	if len(cfg.Recorded) > 0 {
		waitRecorded(waitCtx, cfg.Recorder, m, cfg.Recorded, cfg.Through)
		rep.Targets = append(rep.Targets, cfg.Recorder.Audit(m, cfg.Recorded, cfg.After, cfg.Through)...)
		for id, topics := range cfg.Recorded {
			subs[id] = topics
		}
	}
	for _, a := range rep.Targets {
		rep.Expected += a.Expected
		rep.Delivered += a.Delivered
		rep.Duplicates += a.Duplicates
		rep.Missing += a.Missing
	}

	rep.CommitP50Ms, rep.CommitP99Ms = ms(quantile.Of(res.Commit, 0.50)), ms(quantile.Of(res.Commit, 0.99))
	if cfg.Recorder != nil {
		apply := cfg.Recorder.ApplyLatencies(m, subs, cfg.After, cfg.Through, res.Starts)
		rep.ApplyP50Ms, rep.ApplyP99Ms = ms(quantile.Of(apply, 0.50)), ms(quantile.Of(apply, 0.99))
	}
	rep.OK = rep.Committed > 0 && rep.Duplicates == 0 && rep.Missing == 0 && rep.StateMismatches == 0 &&
		rep.LogDuplicates == 0 && rep.AckedNotInLog == 0
	return rep, nil
}

// waitRecorded polls until every recorded target applied the last LSN with
// data for its topics, or ctx ends.
func waitRecorded(ctx context.Context, rec *Recorder, m *Model, subs map[string][]string, through uint64) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		behind := false
		prog := rec.Progress()
		for id, topics := range subs {
			for _, t := range topics {
				if prog[id].LastLSN < m.LastLSNOf(t, through) {
					behind = true
				}
			}
		}
		if !behind {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// positionAudit audits a shard that no RecordingStore wraps: a message is
// delivered when the shard's applied LSN covers it, missing when not; a key
// the shard has and the model does not (a deleted key come back) counts as a
// duplicate. Lost or repeated writes that leave the position right show in
// StateMismatches (hot keys make a late repeat visible).
func positionAudit(m *Model, sc ShardCheck, after, through uint64) TargetAudit {
	a := TargetAudit{Target: sc.Target, Method: MethodPosition, Expected: m.Messages(sc.Target, after, through)}
	a.Delivered = m.Messages(sc.Target, after, min(sc.AppliedLSN, through))
	a.Missing = a.Expected - a.Delivered
	a.Duplicates = sc.Diff.Unexpected
	return a
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// ErrCheckFailed is WriteChecked's error for a report that is not OK.
var ErrCheckFailed = errors.New("demo check failed: something is missing or duplicated (see the table above)")

// WriteChecked is Write, then ErrCheckFailed when the check found a
// problem (r.OK false): how `logplayer demo` and `dev --demo` end (exit 1).
func (r *Report) WriteChecked(w io.Writer) error {
	if err := r.Write(w); err != nil {
		return err
	}
	if !r.OK {
		return ErrCheckFailed
	}
	return nil
}

// Write prints the summary table and, as the last line, the JSON object.
func (r *Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\texpected\tdelivered\tduplicates\tmissing\tmeasured\t")
	for _, a := range r.Targets {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t\n", a.Target, a.Expected, a.Delivered, a.Duplicates, a.Missing, a.Method)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t\t\n", r.Expected, r.Delivered, r.Duplicates, r.Missing)
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shard\tapplied lsn\tkeys\tmissing\twrong\tunexpected\t")
	for _, s := range r.Shards {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", s.Target, s.AppliedLSN, s.Diff.Keys, s.Diff.Missing, s.Diff.Wrong, s.Diff.Unexpected)
	}
	tw.Flush()
	fmt.Fprintln(w)
	lines := [][2]string{
		{"committed", fmt.Sprintf("%d transactions (%.0f tx/s, %d retries)", r.Committed, r.TxPerSec, r.Retries)},
		{"log", fmt.Sprintf("%d transactions in the run's LSN range, %d ids written twice, %d acknowledged appends not at their LSN", r.LogTxns, r.LogDuplicates, r.AckedNotInLog)},
		{"delivered", fmt.Sprintf("%d of %d messages; %d duplicates, %d missing", r.Delivered, r.Expected, r.Duplicates, r.Missing)},
		{"shard state", fmt.Sprintf("%d keys differ from the model built from the log", r.StateMismatches)},
		{"commit latency", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (Append call to acknowledgement)", r.CommitP50Ms, r.CommitP99Ms)},
	}
	lines = append(lines, [2]string{"apply latency", fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (Append call to durable apply at a target)", r.ApplyP50Ms, r.ApplyP99Ms)})
	verdict := "OK: every committed message applied exactly once"
	if !r.OK {
		verdict = "FAILED"
	}
	lines = append(lines, [2]string{"result", verdict})
	for _, l := range lines {
		fmt.Fprintf(w, "%-15s %s\n", l[0]+":", l[1])
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// ProgressLine formats a live progress line: commits, then each target's
// applied LSN (and messages, when counted per apply) and lag in LSNs. lag
// may be nil: the lag is then the highest acknowledged LSN minus the
// target's applied LSN.
func ProgressLine(p Progress, targets map[string]TargetProgress, lag map[string]uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5.1fs  committed %d (%.0f tx/s)  |", p.Elapsed.Seconds(), p.Committed, p.Rate)
	ids := make([]string, 0, len(targets))
	for id := range targets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := targets[id]
		l, ok := lag[id]
		if !ok && p.MaxLSN > t.LastLSN {
			l = p.MaxLSN - t.LastLSN
		}
		fmt.Fprintf(&b, "  %s at %d", id, t.LastLSN)
		if t.Messages > 0 {
			fmt.Fprintf(&b, " (%d msgs)", t.Messages)
		}
		fmt.Fprintf(&b, " lag %d", l)
	}
	return b.String()
}
