package report

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Target is one registered target (logplayer target list, describe).
type Target struct {
	ID      string   `json:"id"`
	Address string   `json:"address"`
	Topics  []string `json:"topics"`
	Owners  []Owner  `json:"owners"`
	Options []Header `json:"options,omitempty"`
}

// Header is a target option.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Owner is a target's assignment to a LogPlayer group member.
type Owner struct {
	Group          string `json:"group"`
	Target         string `json:"target,omitempty"`
	Member         string `json:"member"`
	Token          uint64 `json:"token"`
	AssignedUnixNs int64  `json:"assigned_unix_nano,omitempty"`
}

// Member is one member of a LogPlayer group.
type Member struct {
	Member         string  `json:"member"`
	AdminAddress   string  `json:"admin_address,omitempty"`
	Incarnation    string  `json:"incarnation,omitempty"`
	JoinedUnixNs   int64   `json:"joined_unix_nano"`
	LeaseExpiresNs int64   `json:"lease_expires_unix_nano"`
	LeaseLeftSec   float64 `json:"lease_left_seconds"`
	Targets        uint32  `json:"targets"`
}

// Group is a LogPlayer group (logplayer players).
type Group struct {
	Group         string   `json:"group"`
	Generation    uint64   `json:"generation"`
	Reassignments uint64   `json:"reassignments"`
	LeaseSeconds  float64  `json:"lease_seconds"`
	LogTimeUnixNs int64    `json:"log_time_unix_nano"`
	Members       []Member `json:"members"`
	Assignments   []Owner  `json:"assignments"`
}

// TargetsOf is the registry's answer as reports, each with its owners;
// with only set, just the target of that id.
func TargetsOf(resp *logstorepb.ListRegisteredTargetsResponse, only string) []Target {
	out := []Target{}
	for _, t := range resp.Targets {
		if only != "" && t.Id != only {
			continue
		}
		tj := Target{ID: t.Id, Address: t.Address, Topics: t.Topics, Owners: []Owner{}}
		for _, o := range t.Options {
			tj.Options = append(tj.Options, Header{Key: o.Key, Value: string(o.Value)})
		}
		for _, a := range resp.Assignments {
			if a.Target.GetId() == t.Id {
				tj.Owners = append(tj.Owners, Owner{Group: a.Group, Member: a.MemberId, Token: a.Token, AssignedUnixNs: a.AssignedUnixNano})
			}
		}
		out = append(out, tj)
	}
	return out
}

// WriteTargets prints targets as the table of logplayer target list.
func WriteTargets(w io.Writer, targets []Target) error {
	tw := table(w)
	fmt.Fprintln(tw, "TARGET\tADDRESS\tTOPICS\tGROUP\tOWNER\tTOKEN")
	for _, t := range targets {
		if len(t.Owners) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\n", t.ID, t.Address, strings.Join(t.Topics, ","))
		}
		for _, o := range t.Owners {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Address, strings.Join(t.Topics, ","), o.Group, OrDash(o.Member), TokenText(o.Token))
		}
	}
	return tw.Flush()
}

// GroupOf is a DescribeGroup answer as a report.
func GroupOf(d *logstorepb.DescribeGroupResponse) Group {
	g := Group{Group: d.Group, Generation: d.Generation, Reassignments: d.Reassignments,
		LeaseSeconds: time.Duration(d.LeaseNanos).Seconds(), LogTimeUnixNs: d.LogTimeUnixNano,
		Members: []Member{}, Assignments: []Owner{}}
	for _, m := range d.Members {
		g.Members = append(g.Members, Member{Member: m.MemberId, AdminAddress: m.AdminAddress, Incarnation: m.Incarnation,
			JoinedUnixNs: m.JoinedUnixNano, LeaseExpiresNs: m.LeaseExpiresUnixNano,
			LeaseLeftSec: time.Duration(m.LeaseExpiresUnixNano - d.LogTimeUnixNano).Seconds(), Targets: m.Targets})
	}
	for _, a := range d.Assignments {
		g.Assignments = append(g.Assignments, Owner{Group: d.Group, Target: a.Target.GetId(), Member: a.MemberId, Token: a.Token, AssignedUnixNs: a.AssignedUnixNano})
	}
	return g
}

// WriteGroups prints groups as logplayer players does: a line and two
// tables (members, assignments) each.
func WriteGroups(w io.Writer, groups []Group) {
	if len(groups) == 0 {
		fmt.Fprintln(w, "no LogPlayer group has had a member yet")
		return
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "group %s: %d members, generation %d, %d reassignments, lease %gs\n",
			g.Group, len(g.Members), g.Generation, g.Reassignments, g.LeaseSeconds)
		tw := table(w)
		fmt.Fprintln(tw, "MEMBER\tADMIN\tINCARNATION\tLEASE LEFT\tTARGETS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%d\n", m.Member, OrDash(m.AdminAddress), OrDash(m.Incarnation), m.LeaseLeftSec, m.Targets)
		}
		tw.Flush()
		tw = table(w)
		fmt.Fprintln(tw, "TARGET\tOWNER\tTOKEN")
		for _, a := range g.Assignments {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Target, OrDash(a.Member), TokenText(a.Token))
		}
		tw.Flush()
	}
}

// RegisterTarget adds t to the target registry, or replaces it (target
// add).
func RegisterTarget(ctx context.Context, cl *client.Client, t *logstorepb.RegisteredTarget) (Done, error) {
	return doneUnless(Done(fmt.Sprintf("registered target %s at %s (topics %s)", t.Id, t.Address, strings.Join(t.Topics, ","))), cl.RegisterTarget(ctx, t))
}

// UnregisterTarget removes the target id from the registry (target
// remove).
func UnregisterTarget(ctx context.Context, cl *client.Client, id string) (Done, error) {
	return doneUnless("removed target "+Done(id), cl.UnregisterTarget(ctx, id))
}

// TargetList is logplayer target list's answer.
type TargetList struct {
	Targets []Target `json:"targets"`
}

// WriteText prints the targets' table.
func (l TargetList) WriteText(w io.Writer) error { return WriteTargets(w, l.Targets) }

// WriteText prints the target as a one-target table.
func (t Target) WriteText(w io.Writer) error { return WriteTargets(w, []Target{t}) }

// ListTargets is the target registry, each target with its owners in
// group ("": in every group) (target list).
func ListTargets(ctx context.Context, cl *client.Client, group string) (TargetList, error) {
	resp, err := cl.ListRegisteredTargets(ctx, group)
	if err != nil {
		return TargetList{}, err
	}
	return TargetList{Targets: TargetsOf(resp, "")}, nil
}

// DescribeTarget is the registered target id with its owners in every
// group; an unknown id is a Refusal (target describe).
func DescribeTarget(ctx context.Context, cl *client.Client, id string) (Target, error) {
	resp, err := cl.ListRegisteredTargets(ctx, "")
	if err != nil {
		return Target{}, err
	}
	out := TargetsOf(resp, id)
	if len(out) == 0 {
		return Target{}, refusef("UNKNOWN_TARGET: no registered target %q", id)
	}
	return out[0], nil
}

// GroupList is logplayer players' answer.
type GroupList struct {
	Groups []Group `json:"groups"`
}

// WriteText prints the groups as WriteGroups does.
func (l GroupList) WriteText(w io.Writer) error {
	WriteGroups(w, l.Groups)
	return nil
}

// Players describes the LogPlayer group named group, or with group ""
// every group the leader knows (players).
func Players(ctx context.Context, cl *client.Client, group string) (GroupList, error) {
	groups := []string{group}
	if group == "" {
		st, err := cl.LeaderStatus(ctx)
		if err != nil {
			return GroupList{}, err
		}
		groups = groups[:0]
		for _, g := range st.PlayerGroups {
			groups = append(groups, g.Group)
		}
	}
	out := GroupList{Groups: []Group{}}
	for _, name := range groups {
		d, err := cl.DescribeGroup(ctx, name)
		if err != nil {
			return GroupList{}, err
		}
		out.Groups = append(out.Groups, GroupOf(d))
	}
	return out, nil
}
