package demo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target"
)

// An events target's data directory (`logplayer events --data-dir`) holds
// its event log, EventLogFileName.

// EventLogPath is the event log of the events target in data directory dir.
func EventLogPath(dir string) string { return filepath.Join(dir, EventLogFileName) }

// OpenEventLogDir opens (or creates, with dir) the event log of data
// directory dir and reads its State: what `logplayer events` serves. On an
// error nothing is left open.
func OpenEventLogDir(dir string) (*EventLog, target.State, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, target.State{}, fmt.Errorf("events: %w", err)
	}
	el, err := OpenEventLog(EventLogPath(dir))
	if err != nil {
		return nil, target.State{}, err
	}
	st, err := el.State()
	if err != nil {
		_ = el.Close()
		return nil, target.State{}, err
	}
	return el, st, nil
}

// ResetEventLogDir is ResetEventLog of the events target in data directory
// dir (`logplayer target reset --data-dir`). A directory without an event
// log is refused: one that holds a shard with the way to reset a shard
// (its --adopt-log-identity, or re-seeding), another with the error of
// looking for the file.
func ResetEventLogDir(dir string, r EventLogReset) (EventLogResetResult, error) {
	path := EventLogPath(dir)
	if _, err := os.Stat(path); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, shard.FileName)); serr == nil {
			return EventLogResetResult{}, fmt.Errorf("%s holds a shard (%s), not an events target: restart the shard once with "+
				"--adopt-log-identity, or re-seed it (empty its --data-dir); see the README's runbook", dir, shard.FileName)
		}
		return EventLogResetResult{}, fmt.Errorf("no events target in %s: %w", dir, err)
	}
	return ResetEventLog(path, r)
}

// Write prints the State before and after the reset, a line each, and
// the count of events deleted.
func (r EventLogResetResult) Write(w io.Writer) error {
	writeResetState(w, "now:  ", r.Before)
	writeResetState(w, "reset:", r.After)
	_, err := fmt.Fprintf(w, "events above lsn %d: %d deleted\n", r.After.AppliedLSN, r.Removed)
	return err
}

func writeResetState(w io.Writer, label string, st target.State) {
	log := "none (the next Hello's is adopted)"
	if st.LogClusterID != "" || st.LogIncarnation != "" {
		log = st.LogClusterID + "/" + st.LogIncarnation
	}
	fmt.Fprintf(w, "%s applied lsn %d, epoch %d, log %s, topics %v\n", label, st.AppliedLSN, st.Epoch, log, st.Topics)
}
