package api

import (
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Limits are the bounds the edge checks a new Append against: the
// leader's own settings, the same it stamps into the entries it writes
// (logstore.Config). A retry is answered before they are looked at.
type Limits struct {
	MaxMessageBytes, MaxRequestBytes int
	// AllowLegacyProducers takes producer ids without producer_epoch;
	// false refuses them (LEGACY_PRODUCER_REFUSED).
	AllowLegacyProducers bool
}

// Admission is the edge's decision on one Append, in this order (issue
// #26):
//  1. producer dedup: a retry of a sequence the producer's row remembers
//     gets its first answer from the state (fsm.State.Retry), the
//     duplicate or the first refusal, whatever changed since: a retry of
//     what committed is never an error;
//  2. validation of the request (the typed INVALID_ARGUMENT errors), and
//     a legacy producer id is refused unless Limits.AllowLegacyProducers
//     (apply enforces the setting the leader stamps too);
//  3. the schemas its topics are declared with, read from the same state
//     as step 1 (so a declaration that state holds was applied after
//     every sequence it remembers: a retry it does not remember cannot
//     have committed before the declaration).
//
// Read takes what steps 1 and 3 need from the state (under the caller's
// state lock, cheap); Check does steps 2 and 3 without the lock (schema
// checks decode messages).
type Admission struct {
	retry   fsm.Result
	isRetry bool
	checks  []schemaCheck
}

// Read reads what admitting req needs from st. Only a leader (caught up
// with every committed entry) checks schemas: a follower's state may lag a
// declaration the leader already acknowledged, and a follower answers
// NOT_LEADER anyway.
func Read(st *fsm.State, req *logstorepb.AppendRequest, leader bool) Admission {
	var a Admission
	if a.retry, a.isRetry = st.Retry(req); !a.isRetry && leader {
		a.checks = schemaChecks(st, req)
	}
	return a
}

// IsRetry reports whether req is a retry of a remembered sequence: Answer
// is then its answer, and nothing else is checked.
func (a *Admission) IsRetry() bool { return a.isRetry }

// Answer is a retry's answer: the first result as a duplicate, or the
// stored refusal.
func (a *Admission) Answer() (*logstorepb.AppendResponse, error) {
	resp, _ := a.retry.Resp.(*logstorepb.AppendResponse)
	return resp, a.retry.Err
}

// Check validates a request that is not a retry against lim and the
// schemas Read found, and returns its encoded size.
func (a *Admission) Check(req *logstorepb.AppendRequest, lim Limits) (int, error) {
	size, err := validateAppend(req, lim.MaxMessageBytes, lim.MaxRequestBytes)
	if err != nil {
		return 0, err
	}
	if req.ProducerId != "" && req.ProducerEpoch == 0 && !lim.AllowLegacyProducers {
		return 0, fsm.LegacyProducerRefused(req.ProducerId)
	}
	return size, checkSchemas(a.checks)
}

// schemaCheck is one slice of an Append to check against its topic's
// declared schema (anything but BYTES).
type schemaCheck struct {
	slice  *logstorepb.Slice
	schema logstorepb.TopicSchema
	by     string
}

// schemaChecks lists the slices of req that st declares a schema for.
func schemaChecks(st *fsm.State, req *logstorepb.AppendRequest) []schemaCheck {
	if st.TopicDeclarationCount() == 0 {
		return nil
	}
	var checks []schemaCheck
	for _, sl := range req.Slices {
		if schema, by := st.TopicSchema(sl.Topic); schema != logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES {
			checks = append(checks, schemaCheck{sl, schema, by})
		}
	}
	return checks
}

// checkSchemas refuses, before the log, an Append with a message that does
// not match its topic's declared schema (SCHEMA_MISMATCH). Apply checks
// again (fsm.Machine.checkTopics), so a request that slipped past a
// declaration committed meanwhile is refused the same way on every
// replica.
func checkSchemas(checks []schemaCheck) error {
	for _, c := range checks {
		if err := fsm.CheckSlice(c.slice.Topic, c.slice.Messages, c.schema, c.by); err != nil {
			return err
		}
	}
	return nil
}
