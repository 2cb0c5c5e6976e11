package fsm

import (
	"fmt"
	"reflect"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Cluster versions. A node's binary supports every version up to
// CurrentVersion; the cluster runs at the committed cluster version, the
// minimum its voters advertised (the leader commits it with
// SetClusterVersion when that minimum rises, never lowering it). A command
// kind needing a higher version than the committed one is refused, at the
// edge (Gate, before it enters the log) and again by apply (so an entry
// written before the version dropped from a leader's view, or by a leader
// that skipped the edge check, has the same effect on every replica).
const (
	// BaseVersion is what a binary without the gate supports: Append,
	// NextEpoch, ReportConsumer, Member. A state that never applied a
	// SetClusterVersion is at it.
	BaseVersion uint32 = 1
	// CurrentVersion is the highest version this binary supports.
	// AdmissionVersion and IdentityVersion are both 4: the two came in one
	// release, so no binary knows one and not the other.
	CurrentVersion uint32 = AdmissionVersion
)

// AdmissionVersion (issue #26) changes what apply does, not what it
// accepts: an Append's producer dedup comes before its topic checks (a
// retry of a committed sequence is answered as the duplicate it is after
// its topic's schema changed), and the entry's ApplyLimits decide whether
// legacy (unregistered) producer ids are taken. Below it apply does what
// version 3 did, so replicas of mixed binaries stay identical.
const AdmissionVersion uint32 = 4

// minVersion is the cluster version each command kind needs. A kind that
// is not listed needs BaseVersion. A new command kind (or a new field that
// changes what apply does, checked in Required) adds one line here with
// the version that introduced it, and CurrentVersion moves up with it.
var minVersion = map[reflect.Type]uint32{
	kindName(&logstorepb.Command_DeleteGroup{}):    2,
	kindName(&logstorepb.Command_Group{}):          3, // PlayerGroup (group.go)
	kindName(&logstorepb.Command_CreateTopic{}):    TopicsVersion,
	kindName(&logstorepb.Command_InitProducer{}):   producerVersion,
	kindName(&logstorepb.Command_SetLogIdentity{}): IdentityVersion, // identity.go
	// SetClusterVersion is not gated (it is what opens the gate): the
	// leader writes SetClusterVersion(v) only when every voter advertised
	// v >= 2, and every such binary knows it.
}

// kindName is a command kind's key in minVersion: its dynamic type
// (reflect.TypeOf neither allocates nor formats, and Required runs for
// every command at the edge and in apply on every replica).
func kindName(k any) reflect.Type { return reflect.TypeOf(k) }

// Required is the cluster version c needs. A command whose kind this
// binary does not know (written by a newer leader: it decodes with a nil
// Kind) needs a version above CurrentVersion.
func Required(c *logstorepb.Command) uint32 {
	if c.Kind == nil {
		return CurrentVersion + 1
	}
	if v, ok := minVersion[kindName(c.Kind)]; ok {
		return v
	}
	if registered(c.GetAppend()) { // the registered-producer fields change apply
		return producerVersion
	}
	return BaseVersion
}

// Gate returns FEATURE_NOT_ENABLED when c needs a higher version than the
// cluster runs at (st's committed version), else nil. The server calls it
// before submitting; apply calls it again.
func Gate(st *State, c *logstorepb.Command) error {
	need := Required(c)
	if need <= st.ClusterVersion() {
		return nil
	}
	return apierr.New(logstorepb.ErrorCode_FEATURE_NOT_ENABLED,
		fmt.Sprintf("logstore: command needs cluster version %d, the cluster runs at %d (a voter has not been upgraded, or this binary supports only %d)", need, st.ClusterVersion(), CurrentVersion),
		func(d *logstorepb.ErrorDetail) { d.Limit = uint64(need) })
}

// SetClusterVersionCommand is the command that raises the cluster version to v.
func SetClusterVersionCommand(v uint32) *logstorepb.Command {
	return &logstorepb.Command{Kind: &logstorepb.Command_SetClusterVersion{SetClusterVersion: &logstorepb.SetClusterVersion{Version: v}}}
}

// ClusterVersion is the committed cluster version.
func (s *State) ClusterVersion() uint32 { return max(s.clusterVersion, BaseVersion) }

// applySetClusterVersion raises the version; lowering it (or naming one
// this binary does not support) is refused and changes nothing.
func (m *Machine) applySetClusterVersion(r *logstorepb.SetClusterVersion) Result {
	st := m.st
	if r.Version < st.ClusterVersion() || r.Version > CurrentVersion {
		return Result{Err: apierr.Newf(logstorepb.ErrorCode_INVALID_ARGUMENT, "logstore: cluster version %d refused (at %d, this binary supports up to %d)", r.Version, st.ClusterVersion(), CurrentVersion)}
	}
	st.clusterVersion = r.Version
	return Result{Resp: &logstorepb.AddVoterResponse{}}
}
