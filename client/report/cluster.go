package report

import (
	"context"
	"fmt"
	"strings"

	"github.com/logplayer/logplayer/client"
)

// The Raft membership changes of logplayer cluster add, remove and
// transfer, and logplayer group delete.

// AddVoter adds the voter id (cluster add).
func AddVoter(ctx context.Context, cl *client.Client, id, raftAddr, apiAddr string) (Done, error) {
	return doneUnless("added voter "+Done(id), cl.AddVoter(ctx, id, raftAddr, apiAddr))
}

// RemoveServer removes the server id (cluster remove). Raft treats removing
// an unknown id as done: an id not in the leader's configuration is a
// Refusal instead.
func RemoveServer(ctx context.Context, cl *client.Client, id string) (Done, error) {
	st, err := cl.LeaderStatus(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, sv := range st.Servers {
		if sv.Id == id {
			return doneUnless("removed "+Done(id), cl.RemoveServer(ctx, id))
		}
		ids = append(ids, sv.Id)
	}
	return "", refusef("no server %q in the configuration (members: %s)", id, strings.Join(ids, ", "))
}

// TransferLeadership hands leadership to id, or to the server Raft picks
// when id is "" (cluster transfer).
func TransferLeadership(ctx context.Context, cl *client.Client, id string) (Done, error) {
	done := Done("leadership transferred")
	if id != "" {
		done += " to " + Done(id)
	}
	return doneUnless(done, cl.TransferLeadership(ctx, id))
}

// DeleteGroup removes the consumer group's committed offsets (group
// delete).
func DeleteGroup(ctx context.Context, cl *client.Client, group string) (Done, error) {
	n, err := cl.DeleteGroup(ctx, group)
	return doneUnless(Done(fmt.Sprintf("deleted %d committed offsets of group %s", n, group)), err)
}

// doneUnless is d, or err when there is one.
func doneUnless(d Done, err error) (Done, error) {
	if err != nil {
		return "", err
	}
	return d, nil
}
