package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// notLeader is the NOT_LEADER error naming the leader when known.
func (s *server) notLeader() error {
	_, id := s.raft.LeaderWithID()
	var api, httpAPI string
	if id != "" {
		s.node.View(func(st *fsm.State) {
			if m := st.Member(string(id)); m != nil {
				api, httpAPI = m.ApiAddress, m.HttpAddress
			}
		})
	}
	return apierr.New(logstorepb.ErrorCode_NOT_LEADER, fmt.Sprintf("node %s is not the leader (leader %q at %q)", s.cfg.ID, id, api),
		func(d *logstorepb.ErrorDetail) {
			d.LeaderId, d.LeaderAddress, d.LeaderHttpAddress = string(id), api, httpAPI
		})
}

// submit sends one command through the aggregator (leader only).
// The gate is read first, but a follower still answers NOT_LEADER.
func (s *server) submit(ctx context.Context, cmd *logstorepb.Command, size int) (proto.Message, error) {
	return s.submitGated(ctx, cmd, size, s.gate(cmd))
}

// submitAs is submit for a command whose response is an R.
func submitAs[R proto.Message](ctx context.Context, s *server, cmd *logstorepb.Command, size int) (R, error) {
	resp, err := s.submit(ctx, cmd, size)
	if err != nil {
		var none R
		return none, err
	}
	return resp.(R), nil
}

// submitGated is submit for a command whose version gate was already read
// (gateErr, nil when it passes): the leader check, the gate's refusal,
// then the aggregator.
func (s *server) submitGated(ctx context.Context, cmd *logstorepb.Command, size int, gateErr error) (proto.Message, error) {
	if !s.isLeader() {
		return nil, s.notLeader()
	}
	if gateErr != nil {
		return nil, gateErr
	}
	resp, err := s.agg.Submit(ctx, cmd, size)
	return resp, s.submitErr(err)
}

// submitErr maps an aggregator error to the status a writer gets.
func (s *server) submitErr(err error) error {
	if errors.Is(err, apierr.ErrNotLeader) {
		return s.notLeader()
	}
	return apierr.Status(err)
}

func (s *server) Append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	start := time.Now()
	resp, err := s.append(ctx, req)
	s.metrics.appendAnswered(err, time.Since(start))
	return resp, err
}

func (s *server) append(ctx context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	if err := s.authorizeProducers(ctx, req); err != nil {
		return nil, err
	}
	leader, err := s.awaitCaughtUp(ctx)
	if err != nil {
		return nil, err
	}
	a, err := s.admitAppend(req, leader)
	if err != nil || a.cmd == nil {
		return a.answer, err
	}
	// The gate was read with admission, under the same state lock.
	resp, err := s.submitGated(ctx, a.cmd, a.size, a.gateErr)
	if err != nil {
		return nil, err
	}
	return resp.(*logstorepb.AppendResponse), nil
}

// awaitCaughtUp waits, on the leader, until its state holds every entry
// committed before its term (caughtUp), so admission reads a state that
// knows every committed sequence. leader is false on a follower.
func (s *server) awaitCaughtUp(ctx context.Context) (leader bool, err error) {
	if s.raft.State() != raft.Leader {
		return false, nil
	}
	switch err := s.node.CaughtUp(ctx); {
	case err == nil:
		return true, nil
	case errors.Is(err, apierr.ErrNotLeader):
		return false, s.notLeader()
	default:
		return false, apierr.Status(err)
	}
}

// admission is the edge's decision on one valid Append: the Raft command
// to submit with its encoded size, or (cmd nil) the answer to a retry.
type admission struct {
	cmd    *logstorepb.Command
	size   int
	answer *logstorepb.AppendResponse
	// gateErr is the version gate's answer to cmd (server.gate), read
	// with the rest, under the same state lock: Append returns it where
	// submit would (after the leader check), AppendBatch does not gate.
	gateErr error
}

// admitAppend decides on req before the log (Admission: producer
// dedup, then validation, then schemas, from one read of the state).
func (s *server) admitAppend(req *logstorepb.AppendRequest, leader bool) (admission, error) {
	var a Admission
	cmd := &logstorepb.Command{Kind: &logstorepb.Command_Append{Append: req}}
	var gateErr error
	s.node.View(func(st *fsm.State) {
		if a = Read(st, req, leader); !a.IsRetry() {
			gateErr = fsm.Gate(st, cmd)
		}
	})
	if a.IsRetry() {
		resp, err := a.Answer()
		return admission{answer: resp}, err
	}
	size, err := a.Check(req, s.cfg.Limits)
	if err != nil {
		return admission{}, err
	}
	return admission{cmd: cmd, size: size, gateErr: gateErr}, nil
}

func (s *server) NextEpoch(ctx context.Context, req *logstorepb.NextEpochRequest) (*logstorepb.NextEpochResponse, error) {
	return submitAs[*logstorepb.NextEpochResponse](ctx, s, &logstorepb.Command{Kind: &logstorepb.Command_NextEpoch{NextEpoch: req}}, 8)
}

func (s *server) ReportConsumer(ctx context.Context, req *logstorepb.ReportConsumerRequest) (*logstorepb.ReportConsumerResponse, error) {
	if err := ValidName("consumer", req.Consumer); err != nil {
		return nil, err
	}
	return submitAs[*logstorepb.ReportConsumerResponse](ctx, s, &logstorepb.Command{Kind: &logstorepb.Command_ReportConsumer{ReportConsumer: req}}, proto.Size(req))
}

func (s *server) FetchOffsets(_ context.Context, req *logstorepb.FetchOffsetsRequest) (*logstorepb.FetchOffsetsResponse, error) {
	if err := ValidName("group", req.Group); err != nil {
		return nil, err
	}
	if err := ValidateTopics(req.Topics); err != nil {
		return nil, err
	}
	var out []*logstorepb.OffsetCommit
	s.node.View(func(st *fsm.State) { out = st.GroupOffsets(req.Group, req.Topics) })
	return &logstorepb.FetchOffsetsResponse{Offsets: out}, nil
}

func (s *server) DeleteGroup(ctx context.Context, req *logstorepb.DeleteGroupRequest) (*logstorepb.DeleteGroupResponse, error) {
	if err := ValidName("group", req.Group); err != nil {
		return nil, err
	}
	return submitAs[*logstorepb.DeleteGroupResponse](ctx, s, &logstorepb.Command{Kind: &logstorepb.Command_DeleteGroup{DeleteGroup: req}}, proto.Size(req))
}

func (s *server) Status(context.Context, *logstorepb.StatusRequest) (*logstorepb.StatusResponse, error) {
	_, id := s.raft.LeaderWithID()
	resp := &logstorepb.StatusResponse{
		NodeId:           s.cfg.ID,
		Role:             roleName(s.raft.State()),
		LeaderId:         string(id),
		RaftTerm:         s.raft.CurrentTerm(),
		CommitIndex:      s.raft.CommitIndex(),
		AppliedIndex:     s.raft.AppliedIndex(),
		HeadLsn:          uint64(s.node.Head()),
		FirstLsn:         uint64(s.log.FirstLSN()),
		SegmentBytes:     uint64(s.log.SizeBytes()),
		SupportedVersion: s.node.SupportedVersion(),
	}
	var members map[string]*logstorepb.MemberCommand
	s.node.View(func(st *fsm.State) {
		resp.Epoch = uint64(st.Epoch())
		resp.ClusterVersion = st.ClusterVersion()
		resp.Consumers, members = st.Consumers(), st.Members()
		resp.RegisteredTargets, resp.PlayerGroups = uint32(len(st.RegisteredTargets())), st.GroupStatuses()
		statusLogIdentity(resp, st)
	})
	s.statusTopics(resp)    // bounded: topics.go
	s.node.StatusTier(resp) // logstore/tiering.go
	if m := members[string(id)]; m != nil {
		resp.LeaderAddress, resp.LeaderHttpAddress = m.ApiAddress, m.HttpAddress
	}
	if f := s.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			out := &logstorepb.Server{Id: string(srv.ID), RaftAddress: string(srv.Address), Voter: srv.Suffrage == raft.Voter}
			if m := members[string(srv.ID)]; m != nil {
				out.ApiAddress = m.ApiAddress
			}
			resp.Servers = append(resp.Servers, out)
		}
	}
	return resp, nil
}

// statusLogIdentity fills the identity of Status: empty parts while not
// set, and no incarnation while a new one is pending.
func statusLogIdentity(resp *logstorepb.StatusResponse, st *fsm.State) {
	clusterID, incarnation, stale := st.LogIdentity()
	resp.LogClusterId = clusterID
	if !stale {
		resp.LogIncarnation = incarnation
	}
}

func roleName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	default:
		return "shutdown"
	}
}

// scan streams visible transactions [from, to] (to 0: forever) in batches,
// waiting at the head. fn gets each batch's transactions (filtered to topics
// when given) and the LSN read through; an error from fn ends the scan.
func (s *server) scan(ctx context.Context, from, to types.LSN, topics []string, maxTxns int,
	fn func(txns []*logstorepb.Transaction, through types.LSN) error) error {
	s.metrics.readStreams.Inc()
	defer s.metrics.readStreams.Dec()
	if first := s.log.OldestReadable(); from < first && from <= s.node.Head() {
		return belowRetention(from, first)
	}
	if maxTxns <= 0 || maxTxns > s.cfg.ReadBatchTxns {
		maxTxns = s.cfg.ReadBatchTxns
	}
	for to == 0 || from <= to {
		wake := s.node.HeadChanged()
		head := s.node.Head()
		if from > head {
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return apierr.Status(ctx.Err())
			case <-s.node.ReadsEnded():
				return apierr.Status(apierr.ErrShuttingDown)
			}
		}
		end := min(head, from+types.LSN(maxTxns)-1)
		if to != 0 {
			end = min(end, to)
		}
		var batch []*logstorepb.Transaction
		bytes, through := 0, from-1
		err := s.log.Read(from, end, func(txn *logstorepb.Transaction) (bool, error) {
			through = types.LSN(txn.Lsn)
			if txn = filterTxn(txn, topics); txn != nil {
				batch = append(batch, txn)
				bytes += proto.Size(txn)
			}
			return bytes < s.cfg.ReadBatchBytes, nil
		})
		if errors.Is(err, segment.ErrBelowRetention) {
			return belowRetention(from, s.log.OldestReadable())
		}
		if err != nil {
			return apierr.Status(fmt.Errorf("read lsn %d..%d: %w", from, end, err))
		}
		if through < from { // a reader never gets nothing from a visible range
			return apierr.Status(fmt.Errorf("read lsn %d..%d returned nothing (head %d)", from, end, head))
		}
		if err := fn(batch, through); err != nil {
			return err
		}
		from = through + 1
	}
	return nil
}

func belowRetention(from, first types.LSN) error {
	return apierr.New(logstorepb.ErrorCode_BELOW_RETENTION, fmt.Sprintf("lsn %d is below retention; oldest is %d", from, first),
		func(d *logstorepb.ErrorDetail) { d.OldestLsn = uint64(first) })
}

// filterTxn returns txn restricted to topics (nil when none match); all
// topics when topics is empty.
func filterTxn(txn *logstorepb.Transaction, topics []string) *logstorepb.Transaction {
	if len(topics) == 0 {
		return txn
	}
	var out *logstorepb.Transaction
	for _, sl := range txn.Slices {
		if slices.Contains(topics, sl.Topic) {
			if out == nil {
				out = &logstorepb.Transaction{Lsn: txn.Lsn, RaftIndex: txn.RaftIndex, TimestampUnixNano: txn.TimestampUnixNano}
			}
			out.Slices = append(out.Slices, sl)
		}
	}
	if out != nil {
		for _, oc := range txn.OffsetCommits {
			if slices.Contains(topics, oc.Topic) {
				out.OffsetCommits = append(out.OffsetCommits, oc)
			}
		}
	}
	return out
}

func (s *server) Read(req *logstorepb.ReadRequest, stream logstorepb.LogStore_ReadServer) error {
	if req.FromLsn == 0 {
		return InvalidArg("from_lsn must be >= 1")
	}
	if req.ToLsn != 0 && req.ToLsn < req.FromLsn {
		return InvalidArg("to_lsn %d below from_lsn %d", req.ToLsn, req.FromLsn)
	}
	if err := ValidateTopics(req.Topics); err != nil {
		return err
	}
	return s.scan(stream.Context(), types.LSN(req.FromLsn), types.LSN(req.ToLsn), req.Topics, int(req.MaxBatch),
		func(txns []*logstorepb.Transaction, through types.LSN) error {
			return stream.Send(&logstorepb.ReadResponse{Transactions: txns, ReadThroughLsn: uint64(through)})
		})
}

// errStop ends a scan early without an error.
var errStop = errors.New("stop")

func (s *server) ReadTopic(req *logstorepb.ReadTopicRequest, stream logstorepb.LogStore_ReadTopicServer) error {
	if !ValidTopic(req.Topic) {
		return InvalidTopic(req.Topic)
	}
	head := s.node.Head()
	// The topic's next offset, read before the lookup: the segment log holds
	// every offset below it unless retention removed it.
	var next types.Offset
	known := false
	s.node.View(func(st *fsm.State) { next, known = st.NextOffset(req.Topic), topicKnown(st, req.Topic) })
	if !known {
		return unknownTopic(req.Topic)
	}
	from := head + 1 // offset not written by head: every later message of the topic is above head
	lsn, err := s.log.TopicOffsetLSN(req.Topic, types.Offset(req.FromOffset))
	switch {
	case err == nil && lsn <= head:
		from = lsn
	case errors.Is(err, segment.ErrBelowRetention),
		errors.Is(err, segment.ErrNotFound) && types.Offset(req.FromOffset) < next: // retention removed every message of the topic
		first, retained := s.log.TopicFirstOffset(req.Topic)
		oldest := OldestOffset(first, retained, next)
		return apierr.New(logstorepb.ErrorCode_BELOW_RETENTION,
			fmt.Sprintf("topic %q offset %d is below retention; oldest is %d", req.Topic, req.FromOffset, oldest),
			func(d *logstorepb.ErrorDetail) {
				d.Topic, d.OldestLsn, d.OldestOffset = req.Topic, uint64(s.log.OldestReadable()), uint64(oldest)
			})
	case err == nil || errors.Is(err, segment.ErrNotFound):
	default:
		return apierr.Status(err)
	}
	to := types.LSN(0)
	if !req.Follow {
		if from > head {
			return nil
		}
		to = head
	}
	next, sent := types.Offset(req.FromOffset), uint64(0)
	err = s.scan(stream.Context(), from, to, []string{req.Topic}, 0, func(txns []*logstorepb.Transaction, _ types.LSN) error {
		var out []*logstorepb.TopicMessage
		done := false
		for _, txn := range txns {
			for _, sl := range txn.Slices {
				for i, m := range sl.Messages {
					off := types.Offset(sl.FirstOffset) + types.Offset(i)
					if off < next || done {
						continue
					}
					out = append(out, &logstorepb.TopicMessage{Offset: uint64(off), Lsn: txn.Lsn, TimestampUnixNano: txn.TimestampUnixNano, Message: m})
					next, sent = off+1, sent+1
					done = req.MaxMessages != 0 && sent >= req.MaxMessages
				}
			}
		}
		if len(out) > 0 {
			if err := stream.Send(&logstorepb.ReadTopicResponse{Messages: out}); err != nil {
				return err
			}
		}
		if done {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// Cluster service.

func (s *server) leaderOnly() error {
	if s.raft.State() != raft.Leader {
		return s.notLeader()
	}
	return nil
}

func (s *server) AddVoter(ctx context.Context, req *logstorepb.AddVoterRequest) (*logstorepb.AddVoterResponse, error) {
	if err := ValidName("id", req.Id); err != nil {
		return nil, err
	}
	if req.RaftAddress == "" {
		return nil, InvalidArg("raft_address is required")
	}
	if err := s.leaderOnly(); err != nil {
		return nil, err
	}
	// Register the API address first so the new member can be named in
	// NOT_LEADER errors as soon as it may lead.
	if err := CommitMember(ctx, s.agg, s.cfg.RaftTimeout, &logstorepb.MemberCommand{Id: req.Id, RaftAddress: req.RaftAddress, ApiAddress: req.ApiAddress}); err != nil {
		return nil, apierr.Status(err)
	}
	if err := s.raft.AddVoter(raft.ServerID(req.Id), raft.ServerAddress(req.RaftAddress), 0, s.cfg.RaftTimeout).Error(); err != nil {
		return nil, MembershipErr("add voter "+req.Id, err)
	}
	return &logstorepb.AddVoterResponse{}, nil
}

func (s *server) RemoveServer(ctx context.Context, req *logstorepb.RemoveServerRequest) (*logstorepb.RemoveServerResponse, error) {
	if err := ValidName("id", req.Id); err != nil {
		return nil, err
	}
	if err := s.leaderOnly(); err != nil {
		return nil, err
	}
	if err := s.raft.RemoveServer(raft.ServerID(req.Id), 0, s.cfg.RaftTimeout).Error(); err != nil {
		return nil, MembershipErr("remove server "+req.Id, err)
	}
	if req.Id != s.cfg.ID { // a leader that removed itself steps down
		if err := CommitMember(ctx, s.agg, s.cfg.RaftTimeout, &logstorepb.MemberCommand{Id: req.Id, Remove: true}); err != nil {
			s.cfg.Logger.Warn("unregistering removed member", "member", req.Id, "err", err)
		}
	}
	return &logstorepb.RemoveServerResponse{}, nil
}

func (s *server) TransferLeadership(_ context.Context, req *logstorepb.TransferLeadershipRequest) (*logstorepb.TransferLeadershipResponse, error) {
	if err := s.leaderOnly(); err != nil {
		return nil, err
	}
	var f raft.Future
	if req.Id == "" {
		f = s.raft.LeadershipTransfer()
	} else {
		cf := s.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return nil, apierr.Status(err)
		}
		var addr raft.ServerAddress
		for _, srv := range cf.Configuration().Servers {
			if string(srv.ID) == req.Id {
				addr = srv.Address
			}
		}
		if addr == "" {
			return nil, apierr.New(logstorepb.ErrorCode_MEMBERSHIP, fmt.Sprintf("no server %q in the configuration", req.Id), nil)
		}
		f = s.raft.LeadershipTransferToServer(raft.ServerID(req.Id), addr)
	}
	if err := f.Error(); err != nil {
		return nil, MembershipErr("transfer leadership", err)
	}
	return &logstorepb.TransferLeadershipResponse{}, nil
}
