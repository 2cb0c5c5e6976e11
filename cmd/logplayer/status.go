package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
)

func init() {
	register(&command{
		name:     "status",
		summary:  "show the cluster: nodes, leader, LSNs, topics, members, consumers",
		synopsis: "[--addr LIST] [--json] [flags]",
		about: `
Asks every node in --addr for its status and prints one row per node (role,
Raft term, commit and applied index, head and first LSN), then, as the leader
(or else any node) sees it: the topics with their offsets, the Raft members
and the delivery consumers (LogPlayer targets) with their acked LSNs, and a
summary of the target registry and LogPlayer groups (logplayer players). With
--player, also the LogPlayer's view of each target (queue state, connected,
last ack, lag in LSNs and seconds, last error), from its admin API.

Exits 1 only when no node answers; an unreachable node is shown as such.`,
		examples: []string{
			"logplayer status",
			"logplayer status --player 127.0.0.1:7420          # with the LogPlayer's targets: state, last ack, lag",
			"logplayer status --addr 10.0.0.1:7400,10.0.0.2:7400,10.0.0.3:7400 --json",
		},
		new: func() runner { return &statusCmd{} },
	})
}

type statusCmd struct {
	conn   clientFlags
	player optAddrValue
	asJSON bool
}

func (c *statusCmd) flags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.Var(&c.player, "player", "also list the targets of the LogPlayer whose admin API is at this `address`")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON object instead of tables")
}

// statusReport is status's JSON output.
type statusReport struct {
	Nodes  []nodeStatus `json:"nodes"`
	Leader string       `json:"leader"`
	Epoch  uint64       `json:"epoch"`
	// Topics are at most logstore.StatusTopicsMax (the smallest names);
	// TopicCount is how many there are (logplayer topic list shows all).
	Topics          []topicStatus `json:"topics"`
	TopicCount      uint64        `json:"topic_count"`
	TopicsTruncated bool          `json:"topics_truncated,omitempty"`
	Servers         []serverInfo  `json:"servers"`
	Consumers       []consumer    `json:"consumers"`
	Player          *playerReport `json:"player,omitempty"`
	// The target registry and the LogPlayer groups (logplayer players).
	RegisteredTargets uint32               `json:"registered_targets"`
	PlayerGroups      []playerGroupSummary `json:"player_groups"`
}

type playerGroupSummary struct {
	Group         string `json:"group"`
	Members       uint32 `json:"members"`
	OwnedTargets  uint32 `json:"owned_targets"`
	Generation    uint64 `json:"generation"`
	Reassignments uint64 `json:"reassignments"`
}

// playerReport is a LogPlayer's ListTargets.
type playerReport struct {
	ID         string         `json:"id"`
	Epoch      uint64         `json:"epoch"`
	CurrentLSN uint64         `json:"current_lsn"`
	Targets    []targetReport `json:"targets"`
	Group      *groupReport   `json:"group,omitempty"`
}

// groupReport is a group member's view of its membership.
type groupReport struct {
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

type targetReport struct {
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

type nodeStatus struct {
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
	// Tier: statustier.go.
	Tier *tierStatus `json:"tier,omitempty"`
}

type topicStatus struct {
	Topic       string `json:"topic"`
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
}

type serverInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	Voter    bool   `json:"voter"`
}

type consumer struct {
	Consumer string `json:"consumer"`
	AckedLSN uint64 `json:"acked_lsn"`
}

func (c *statusCmd) run(ctx context.Context, s *sys) error {
	cl, err := c.conn.dial(s)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := c.collect(ctx, cl)
	if err != nil {
		return err
	}
	if c.player.addr != "" {
		if rep.Player, err = c.listTargets(ctx); err != nil {
			return err
		}
	}
	if c.asJSON {
		return writeJSONLine(s.stdout, rep)
	}
	rep.writeTables(s.stdout)
	return nil
}

// collect asks every node; it fails only when none answers.
func (c *statusCmd) collect(ctx context.Context, cl *client.Client) (*statusReport, error) {
	rep := &statusReport{Nodes: []nodeStatus{}, Topics: []topicStatus{}, Servers: []serverInfo{}, Consumers: []consumer{}, PlayerGroups: []playerGroupSummary{}}
	var view *logstorepb.StatusResponse
	var lastErr error
	for _, addr := range c.conn.addrs.items {
		nctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
		st, err := cl.Status(nctx, addr)
		if err != nil {
			lastErr = err
			rep.Nodes = append(rep.Nodes, nodeStatus{Addr: addr, Error: oneLine(err.Error())})
			cancel()
			continue
		}
		cancel()
		rep.Nodes = append(rep.Nodes, nodeStatus{
			Addr: addr, ID: st.NodeId, Role: st.Role, LeaderID: st.LeaderId, RaftTerm: st.RaftTerm,
			CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, HeadLSN: st.HeadLsn,
			FirstLSN: st.FirstLsn, SegmentBytes: st.SegmentBytes, Tier: newTierStatus(st),
		})
		if view == nil || st.Role == "leader" {
			view = st
		}
	}
	if m := c.conn.tls.mistake("status", "the LogStore at "+c.conn.addrs.String(), lastErr); view == nil && m != nil {
		return nil, m
	}
	if code := status.Code(lastErr); view == nil && (code == codes.Unauthenticated || code == codes.PermissionDenied) {
		return nil, fmt.Errorf("the LogStore at %s refused status (check --tls-ca, --tls-cert, --token-file): %v", c.conn.addrs.String(), lastErr)
	}
	if view == nil {
		return nil, c.conn.unreachable("status", lastErr)
	}
	rep.Leader, rep.Epoch = view.LeaderId, view.Epoch
	for _, t := range view.Topics {
		rep.Topics = append(rep.Topics, topicStatus{Topic: t.Topic, FirstOffset: t.FirstOffset, NextOffset: t.NextOffset})
	}
	rep.TopicCount, rep.TopicsTruncated = view.TopicCount, view.TopicsTruncated
	if rep.TopicCount == 0 { // a node without the field (older binary): the list is complete
		rep.TopicCount = uint64(len(rep.Topics))
	}
	for _, sv := range view.Servers {
		rep.Servers = append(rep.Servers, serverInfo{ID: sv.Id, RaftAddr: sv.RaftAddress, APIAddr: sv.ApiAddress, Voter: sv.Voter})
	}
	for _, co := range view.Consumers {
		rep.Consumers = append(rep.Consumers, consumer{Consumer: co.Consumer, AckedLSN: co.AckedLsn})
	}
	rep.RegisteredTargets = view.RegisteredTargets
	for _, g := range view.PlayerGroups {
		rep.PlayerGroups = append(rep.PlayerGroups, playerGroupSummary{Group: g.Group, Members: g.Members, OwnedTargets: g.OwnedTargets, Generation: g.Generation, Reassignments: g.Reassignments})
	}
	return rep, nil
}

// listTargets asks the LogPlayer's admin API for its targets.
func (c *statusCmd) listTargets(ctx context.Context) (*playerReport, error) {
	cc, err := c.conn.dialOther(c.player.addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	resp, err := playerpb.NewPlayerAdminClient(cc).ListTargets(ctx, &playerpb.ListTargetsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("cannot list the LogPlayer's targets at %s within %v (is it running? set --player): %v",
			c.player.addr, c.conn.timeout, err)
	}
	pr := &playerReport{ID: resp.PlayerId, Epoch: resp.Epoch, CurrentLSN: resp.CurrentLsn, Targets: []targetReport{}}
	for _, t := range resp.Targets {
		pr.Targets = append(pr.Targets, targetReport{
			ID: t.Config.GetId(), Address: t.Config.GetAddress(), Topics: t.Config.GetTopics(),
			State: t.State, Connected: t.Connected, Blocked: t.Blocked, LastAckLSN: t.LastAckLsn,
			LagEntries: t.LagEntries, LagSeconds: t.LagSeconds, Returns: t.Returns, Epoch: t.Epoch, LastError: t.LastError,
		})
	}
	if g := resp.Group; g != nil {
		pr.Group = &groupReport{
			Group: g.Group, MemberID: g.MemberId, Incarnation: g.Incarnation,
			LeaseRemaining: float64(g.LeaseRemainingNanos) / 1e9, Lease: float64(g.LeaseNanos) / 1e9,
			Generation: g.Generation, Renewals: g.Renewals, Lapses: g.Lapses,
			Gained: g.TargetsGained, Lost: g.TargetsLost, LastError: g.LastError,
		}
	}
	return pr, nil
}

func (r *statusReport) writeTables(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tROLE\tRAFT TERM\tCOMMIT\tAPPLIED\tHEAD LSN\tFIRST LSN\tSEGMENTS")
	for _, n := range r.Nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "-\t%s\tunreachable: %s\n", n.Addr, n.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", n.ID, n.Addr, n.Role, n.RaftTerm, n.CommitIndex,
			n.AppliedIndex, n.HeadLSN, n.FirstLSN, humanBytes(n.SegmentBytes))
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
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PLAYER GROUP\tMEMBERS\tOWNED TARGETS\tGENERATION\tREASSIGNMENTS")
		for _, g := range r.PlayerGroups {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", g.Group, g.Members, g.OwnedTargets, g.Generation, g.Reassignments)
		}
		tw.Flush()
	}
	if len(r.Consumers) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CONSUMER\tACKED LSN")
		for _, co := range r.Consumers {
			fmt.Fprintf(tw, "%s\t%d\n", co.Consumer, co.AckedLSN)
		}
		tw.Flush()
	}
}

// humanBytes formats n with a binary unit: 512B, 595.5KiB, 1.2GiB.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
