package logstore

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// versionPollInterval is how often the leader asks every server of the
// Raft configuration which cluster version it supports (and once at once
// when it is elected, after registering the members).
const versionPollInterval = time.Second

// advertisedVersion is the cluster version this node says it supports:
// Config.AdvertisedVersion, or the binary's fsm.CurrentVersion.
func (n *Node) advertisedVersion() uint32 {
	if v := n.cfg.AdvertisedVersion; v != 0 {
		return min(v, fsm.CurrentVersion)
	}
	return fsm.CurrentVersion
}

// versionLoop runs on every node; while it is the leader it asks each
// server of the Raft configuration (voters and non-voters: both apply
// the log) for its supported_version (Status) and commits
// SetClusterVersion(min) when that minimum is above the committed cluster
// version. A server that does not answer, or has no registered API
// address, holds the version where it is; a server without the field (a
// binary without the gate) answers 0 and holds it at the base version.
// The version is never lowered (apply refuses that).
func (n *Node) versionLoop() {
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()
	t := time.NewTicker(versionPollInterval)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
		case <-n.versionKick: // just elected: members registered, ask now
		}
		if n.raft.State() != raft.Leader {
			continue
		}
		n.ensureLogIdentity()
		want, ok := n.minSupportedVersion(conns)
		if ok {
			n.polledVersion.Store(want)
		}
		var at uint32
		n.fsm.withState(func(st *fsm.State) { at = st.ClusterVersion() })
		if !ok || want <= at {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RaftTimeout)
		cmd := fsm.SetClusterVersionCommand(want)
		_, err := n.agg.Submit(ctx, cmd, 16)
		cancel()
		if err != nil {
			n.log.Warn("raising the cluster version", "version", want, "err", err)
			continue
		}
		n.log.Info("cluster version raised", "from", at, "to", want)
		n.ensureLogIdentity() // at once when the raise opened IdentityVersion
	}
}

// minSupportedVersion is the lowest version the configuration's servers
// advertise, and false when one of them could not be asked.
func (n *Node) minSupportedVersion(conns map[string]*grpc.ClientConn) (uint32, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0, false
	}
	low := n.advertisedVersion()
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == n.cfg.ID {
			continue
		}
		var m *logstorepb.MemberCommand
		n.fsm.withState(func(st *fsm.State) { m = st.Member(string(srv.ID)) })
		if m == nil || m.ApiAddress == "" {
			return 0, false
		}
		cc := conns[m.ApiAddress]
		if cc == nil {
			opts := n.cfg.PeerDialOptions
			if len(opts) == 0 {
				opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			}
			var err error
			if cc, err = grpc.NewClient(m.ApiAddress, opts...); err != nil {
				return 0, false
			}
			conns[m.ApiAddress] = cc
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RaftTimeout)
		st, err := logstorepb.NewLogStoreClient(cc).Status(ctx, &logstorepb.StatusRequest{})
		cancel()
		if err != nil {
			return 0, false
		}
		low = min(low, max(st.SupportedVersion, fsm.BaseVersion))
	}
	return low, true
}

// ClusterVersion is the committed cluster version this node has applied.
func (n *Node) ClusterVersion() uint32 {
	var v uint32
	n.fsm.withState(func(st *fsm.State) { v = st.ClusterVersion() })
	return v
}

// PolledVersion is the lowest version the servers advertised at this
// node's last complete poll as leader (0 before one).
func (n *Node) PolledVersion() uint32 { return n.polledVersion.Load() }
