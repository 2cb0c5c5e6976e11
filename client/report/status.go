package report

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
)

// Status is logplayer status's report and its JSON output.
type Status struct {
	Nodes  []Node `json:"nodes"`
	Leader string `json:"leader"`
	Epoch  uint64 `json:"epoch"`
	// Topics are at most logstore.StatusTopicsMax (the smallest names);
	// TopicCount is how many there are (logplayer topic list shows all).
	Topics          []Topic    `json:"topics"`
	TopicCount      uint64     `json:"topic_count"`
	TopicsTruncated bool       `json:"topics_truncated,omitempty"`
	Servers         []Server   `json:"servers"`
	Consumers       []Consumer `json:"consumers"`
	Player          *Player    `json:"player,omitempty"`
	// The target registry and the LogPlayer groups (logplayer players).
	RegisteredTargets uint32         `json:"registered_targets"`
	PlayerGroups      []GroupSummary `json:"player_groups"`
}

type GroupSummary struct {
	Group         string `json:"group"`
	Members       uint32 `json:"members"`
	OwnedTargets  uint32 `json:"owned_targets"`
	Generation    uint64 `json:"generation"`
	Reassignments uint64 `json:"reassignments"`
}

// Player is a LogPlayer's ListTargets.
type Player struct {
	ID         string         `json:"id"`
	Epoch      uint64         `json:"epoch"`
	CurrentLSN uint64         `json:"current_lsn"`
	Targets    []PlayerTarget `json:"targets"`
	Group      *Membership    `json:"group,omitempty"`
}

// Membership is a group member's view of its membership.
type Membership struct {
	Group          string  `json:"group"`
	MemberID       string  `json:"member_id"`
	Incarnation    string  `json:"incarnation"`
	LeaseRemaining float64 `json:"lease_remaining_seconds"`
	Lease          float64 `json:"lease_seconds"`
	Generation     uint64  `json:"generation"`
	Renewals       uint64  `json:"renewals"`
	Lapses         uint64  `json:"lapses"`
	Gained         uint64  `json:"targets_gained"`
	Lost           uint64  `json:"targets_lost"`
	LastError      string  `json:"last_error,omitempty"`
}

type PlayerTarget struct {
	ID         string   `json:"id"`
	Address    string   `json:"address"`
	Topics     []string `json:"topics"`
	State      string   `json:"state"`
	Connected  bool     `json:"connected"`
	Blocked    bool     `json:"blocked"`
	LastAckLSN uint64   `json:"last_ack_lsn"`
	LagEntries uint64   `json:"lag_entries"`
	LagSeconds float64  `json:"lag_seconds"`
	Returns    uint64   `json:"returns"`
	// Epoch is the target's Hello epoch: the LogPlayer's, or a group
	// member's fencing token for the target.
	Epoch     uint64 `json:"epoch"`
	LastError string `json:"last_error,omitempty"`
}

type Node struct {
	Addr         string `json:"addr"`
	ID           string `json:"id,omitempty"`
	Role         string `json:"role,omitempty"`
	LeaderID     string `json:"leader_id,omitempty"`
	RaftTerm     uint64 `json:"raft_term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	HeadLSN      uint64 `json:"head_lsn"`
	FirstLSN     uint64 `json:"first_lsn"`
	SegmentBytes uint64 `json:"segment_bytes"`
	Error        string `json:"error,omitempty"`
	// Tier: nil without tiered storage.
	Tier *Tier `json:"tier,omitempty"`
}

type Topic struct {
	Topic       string `json:"topic"`
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
}

type Server struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	Voter    bool   `json:"voter"`
}

type Consumer struct {
	Consumer string `json:"consumer"`
	AckedLSN uint64 `json:"acked_lsn"`
}

// Collect asks every node of addrs for its status, each within timeout,
// and builds the report from the leader's view (or else any node's). An
// unreachable node is a row with its error; ok is false when no node
// answered, and lastErr is the last node's error.
func Collect(ctx context.Context, cl *client.Client, addrs []string, timeout time.Duration) (rep *Status, ok bool, lastErr error) {
	var nodes []Node
	var view *logstorepb.StatusResponse
	for _, addr := range addrs {
		nctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := cl.Status(nctx, addr)
		cancel()
		if err != nil {
			lastErr = err
			nodes = append(nodes, Node{Addr: addr, Error: strings.Join(strings.Fields(err.Error()), " ")})
			continue
		}
		nodes = append(nodes, nodeOf(addr, st))
		if view == nil || st.Role == "leader" {
			view = st
		}
	}
	if view == nil {
		return nil, false, lastErr
	}
	return statusOf(nodes, view), true, lastErr
}

// nodeOf is the row of the node at addr that answered st.
func nodeOf(addr string, st *logstorepb.StatusResponse) Node {
	return Node{
		Addr: addr, ID: st.NodeId, Role: st.Role, LeaderID: st.LeaderId, RaftTerm: st.RaftTerm,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, HeadLSN: st.HeadLsn,
		FirstLSN: st.FirstLsn, SegmentBytes: st.SegmentBytes, Tier: newTier(st),
	}
}

// statusOf is the report of nodes, with the cluster as view (the leader's
// status, or else any node's) shows it.
func statusOf(nodes []Node, view *logstorepb.StatusResponse) *Status {
	rep := &Status{Nodes: append([]Node{}, nodes...), Topics: []Topic{}, Servers: []Server{}, Consumers: []Consumer{}, PlayerGroups: []GroupSummary{}}
	rep.Leader, rep.Epoch = view.LeaderId, view.Epoch
	for _, t := range view.Topics {
		rep.Topics = append(rep.Topics, Topic{Topic: t.Topic, FirstOffset: t.FirstOffset, NextOffset: t.NextOffset})
	}
	rep.TopicCount, rep.TopicsTruncated = view.TopicCount, view.TopicsTruncated
	if rep.TopicCount == 0 { // a node without the field (older binary): the list is complete
		rep.TopicCount = uint64(len(rep.Topics))
	}
	for _, sv := range view.Servers {
		rep.Servers = append(rep.Servers, Server{ID: sv.Id, RaftAddr: sv.RaftAddress, APIAddr: sv.ApiAddress, Voter: sv.Voter})
	}
	for _, co := range view.Consumers {
		rep.Consumers = append(rep.Consumers, Consumer{Consumer: co.Consumer, AckedLSN: co.AckedLsn})
	}
	rep.RegisteredTargets = view.RegisteredTargets
	for _, g := range view.PlayerGroups {
		rep.PlayerGroups = append(rep.PlayerGroups, GroupSummary{Group: g.Group, Members: g.Members, OwnedTargets: g.OwnedTargets, Generation: g.Generation, Reassignments: g.Reassignments})
	}
	return rep
}

// ListPlayerTargets asks the LogPlayer admin API on cc for its targets
// (waiting for cc to be ready until ctx ends).
func ListPlayerTargets(ctx context.Context, cc grpc.ClientConnInterface) (*Player, error) {
	resp, err := playerpb.NewPlayerAdminClient(cc).ListTargets(ctx, &playerpb.ListTargetsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return PlayerOf(resp), nil
}

// PlayerOf is a LogPlayer's ListTargets answer as a report.
func PlayerOf(resp *playerpb.ListTargetsResponse) *Player {
	pr := &Player{ID: resp.PlayerId, Epoch: resp.Epoch, CurrentLSN: resp.CurrentLsn, Targets: []PlayerTarget{}}
	for _, t := range resp.Targets {
		pr.Targets = append(pr.Targets, PlayerTarget{
			ID: t.Config.GetId(), Address: t.Config.GetAddress(), Topics: t.Config.GetTopics(),
			State: t.State, Connected: t.Connected, Blocked: t.Blocked, LastAckLSN: t.LastAckLsn,
			LagEntries: t.LagEntries, LagSeconds: t.LagSeconds, Returns: t.Returns, Epoch: t.Epoch, LastError: t.LastError,
		})
	}
	if g := resp.Group; g != nil {
		pr.Group = &Membership{
			Group: g.Group, MemberID: g.MemberId, Incarnation: g.Incarnation,
			LeaseRemaining: float64(g.LeaseRemainingNanos) / 1e9, Lease: float64(g.LeaseNanos) / 1e9,
			Generation: g.Generation, Renewals: g.Renewals, Lapses: g.Lapses,
			Gained: g.TargetsGained, Lost: g.TargetsLost, LastError: g.LastError,
		}
	}
	return pr
}

// WriteTables prints the report as the tables of logplayer status.
func (r *Status) WriteTables(w io.Writer) {
	tw := table(w)
	fmt.Fprintln(tw, "NODE\tADDRESS\tROLE\tRAFT TERM\tCOMMIT\tAPPLIED\tHEAD LSN\tFIRST LSN\tSEGMENTS")
	for _, n := range r.Nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "-\t%s\tunreachable: %s\n", n.Addr, n.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", n.ID, n.Addr, n.Role, n.RaftTerm, n.CommitIndex,
			n.AppliedIndex, n.HeadLSN, n.FirstLSN, HumanBytes(n.SegmentBytes))
	}
	tw.Flush()
	r.writeTierTable(w)
	leader := r.Leader
	if leader == "" {
		leader = "none known"
	}
	fmt.Fprintf(w, "\nleader: %s   LogPlayer epoch: %d\n", leader, r.Epoch)
	if len(r.Topics) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "TOPIC\tFIRST OFFSET\tNEXT OFFSET")
		for _, t := range r.Topics {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", t.Topic, t.FirstOffset, t.NextOffset)
		}
		tw.Flush()
		if r.TopicsTruncated {
			fmt.Fprintf(w, "(first %d of %d topics; 'logplayer topic list' shows all)\n", len(r.Topics), r.TopicCount)
		}
	}
	if len(r.Servers) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "MEMBER\tVOTER\tRAFT ADDRESS\tAPI ADDRESS")
		for _, sv := range r.Servers {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", sv.ID, sv.Voter, sv.RaftAddr, sv.APIAddr)
		}
		tw.Flush()
	}
	if p := r.Player; p != nil {
		fmt.Fprintf(w, "\nLogPlayer %s, epoch %d, dispatched through LSN %d\n", p.ID, p.Epoch, p.CurrentLSN)
		if g := p.Group; g != nil {
			lease := fmt.Sprintf("%.2fs of %.2fs left", max(0, g.LeaseRemaining), g.Lease)
			if g.LeaseRemaining <= 0 {
				lease = "LAPSED: not delivering"
			}
			fmt.Fprintf(w, "group %s, member %s (incarnation %s): lease %s; generation %d, renewals %d, lapses %d, targets gained %d, lost %d\n",
				g.Group, g.MemberID, g.Incarnation, lease, g.Generation, g.Renewals, g.Lapses, g.Gained, g.Lost)
			if g.LastError != "" {
				fmt.Fprintf(w, "last heartbeat error: %s\n", g.LastError)
			}
		}
		tw = table(w)
		fmt.Fprintln(tw, "TARGET\tSTATE\tCONNECTED\tEPOCH\tLAST ACK\tLAG\tLAG SECONDS\tRETURNS\tTOPICS\tERROR")
		for _, t := range p.Targets {
			state := t.State
			if t.Blocked {
				state += " (blocked)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%d\t%.3f\t%d\t%s\t%s\n", t.ID, state, t.Connected, t.Epoch, t.LastAckLSN,
				t.LagEntries, t.LagSeconds, t.Returns, strings.Join(t.Topics, ","), t.LastError)
		}
		tw.Flush()
	}
	if len(r.PlayerGroups) > 0 || r.RegisteredTargets > 0 {
		fmt.Fprintf(w, "\nregistered targets: %d (logplayer players shows the groups)\n", r.RegisteredTargets)
		tw = table(w)
		fmt.Fprintln(tw, "PLAYER GROUP\tMEMBERS\tOWNED TARGETS\tGENERATION\tREASSIGNMENTS")
		for _, g := range r.PlayerGroups {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", g.Group, g.Members, g.OwnedTargets, g.Generation, g.Reassignments)
		}
		tw.Flush()
	}
	if len(r.Consumers) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		fmt.Fprintln(tw, "CONSUMER\tACKED LSN")
		for _, co := range r.Consumers {
			fmt.Fprintf(tw, "%s\t%d\n", co.Consumer, co.AckedLSN)
		}
		tw.Flush()
	}
}

// Tier is a node's local and tiered LSN ranges (StatusResponse
// fields 54-59, logstore/tiering.go); nil for a node without tiered
// storage activity.
type Tier struct {
	LocalFirstLSN uint64 `json:"local_first_lsn"`
	TierFirstLSN  uint64 `json:"tier_first_lsn"`
	TierLastLSN   uint64 `json:"tier_last_lsn"`
	UploadedBytes uint64 `json:"tier_uploaded_bytes"`
	LagSegments   uint64 `json:"tier_lag_segments"`
	LagBytes      uint64 `json:"tier_lag_bytes"`
}

func newTier(st *logstorepb.StatusResponse) *Tier {
	if st.TierLastLsn == 0 && st.TierLagSegments == 0 && st.TierUploadedBytes == 0 {
		return nil
	}
	return &Tier{
		LocalFirstLSN: st.LocalFirstLsn, TierFirstLSN: st.TierFirstLsn, TierLastLSN: st.TierLastLsn,
		UploadedBytes: st.TierUploadedBytes, LagSegments: st.TierLagSegments, LagBytes: st.TierLagBytes,
	}
}

// writeTierTable prints the nodes' local and tiered ranges when any node
// has tiered storage.
func (r *Status) writeTierTable(w io.Writer) {
	has := false
	for _, n := range r.Nodes {
		has = has || n.Tier != nil
	}
	if !has {
		return
	}
	fmt.Fprintln(w)
	tw := table(w)
	fmt.Fprintln(tw, "NODE\tLOCAL LSNS\tTIERED LSNS\tUPLOADED\tUPLOAD LAG")
	for _, n := range r.Nodes {
		if t := n.Tier; t != nil {
			tiered := "none"
			if t.TierLastLSN != 0 {
				tiered = fmt.Sprintf("%d..%d", t.TierFirstLSN, t.TierLastLSN)
			}
			fmt.Fprintf(tw, "%s\t%d..%d\t%s\t%s\t%d segments, %s\n", n.ID, t.LocalFirstLSN, n.HeadLSN, tiered,
				HumanBytes(t.UploadedBytes), t.LagSegments, HumanBytes(t.LagBytes))
		}
	}
	tw.Flush()
}
