package security

import (
	"fmt"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionalphapb "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/playerpb"
	"github.com/logplayer/logplayer/proto/shardpb"
	"github.com/logplayer/logplayer/proto/targetpb"
)

// rule is who may call one RPC.
type rule struct {
	// public: no identity needed (health checks from load balancers and
	// orchestrators).
	public bool
	// roles: the caller needs one of them; empty (and not public) means
	// any authenticated identity.
	roles []Role
	// check, when set, inspects the request (a stream's first message) and
	// returns the refusal, or nil. It runs after the role check.
	check func(a *Authorizer, g *grantSet, req proto.Message) *denial
	// filterRead: the stream's ReadResponses are filtered to the topics
	// the caller may read.
	filterRead bool
}

// denial says why a call was refused: which topic or group, in words.
type denial struct {
	topic, group string
	msg          string
}

// methods is the method table: every RPC of proto/*.proto, plus the
// standard health and reflection services. An RPC not here is refused
// (PERMISSION_DENIED), and TestMethodTableCoversProtos fails when a proto
// gains a method this table lacks.
var methods = map[string]rule{
	logstorepb.LogStore_Append_FullMethodName:         {roles: []Role{RoleProducer, RoleConsumer}, check: checkOf(checkAppend)},
	logstorepb.LogStore_AppendBatch_FullMethodName:    {roles: []Role{RoleProducer, RoleConsumer}, check: checkOf(checkAppendBatch)},
	logstorepb.LogStore_Read_FullMethodName:           {roles: []Role{RolePlayer, RoleConsumer}, check: checkOf(checkRead), filterRead: true},
	logstorepb.LogStore_ReadTopic_FullMethodName:      {roles: []Role{RolePlayer, RoleConsumer}, check: checkOf(checkReadTopic)},
	logstorepb.LogStore_FetchOffsets_FullMethodName:   {roles: []Role{RoleConsumer}, check: checkOf(checkFetchOffsets)},
	logstorepb.LogStore_DeleteGroup_FullMethodName:    {roles: []Role{RoleAdmin}},
	logstorepb.LogStore_NextEpoch_FullMethodName:      {roles: []Role{RolePlayer}},
	logstorepb.LogStore_ReportConsumer_FullMethodName: {roles: []Role{RolePlayer}},
	logstorepb.LogStore_Status_FullMethodName:         {},
	// Topic declarations are configuration: admin declares them; any
	// identity may read them (Status shows topic names to everyone too).
	logstorepb.LogStore_CreateTopic_FullMethodName:   {roles: []Role{RoleAdmin}},
	logstorepb.LogStore_DescribeTopic_FullMethodName: {},
	logstorepb.LogStore_ListTopics_FullMethodName:    {},
	// Registering a producer writes nothing to a topic (the Appends that
	// follow are checked against the topic grants); every identity that may
	// Append registers the producer it appends with (read-process-write
	// consumers too), under a name its grants bind (Grant.Producers).
	// Registering fences the name's older instance, so another identity's
	// name is refused without a word of its state. An Append's producer id
	// is checked by the LogStore (logstore/api/producerauth.go: the id's name is
	// in the replicated producer table), with Access.MayUseProducer.
	logstorepb.LogStore_InitProducer_FullMethodName: {roles: []Role{RoleProducer, RoleConsumer}, check: checkOf(checkInitProducer)},

	logstorepb.Cluster_AddVoter_FullMethodName:           {roles: []Role{RoleAdmin}},
	logstorepb.Cluster_RemoveServer_FullMethodName:       {roles: []Role{RoleAdmin}},
	logstorepb.Cluster_TransferLeadership_FullMethodName: {roles: []Role{RoleAdmin}},
	// A backup holds every topic and the whole state: admin only.
	logstorepb.Cluster_Backup_FullMethodName: {roles: []Role{RoleAdmin}},

	// The target registry is configuration: admin writes it; any identity
	// may read it. Membership (leases, assignments) is the players' own.
	logstorepb.PlayerGroup_RegisterTarget_FullMethodName:        {roles: []Role{RoleAdmin}},
	logstorepb.PlayerGroup_UnregisterTarget_FullMethodName:      {roles: []Role{RoleAdmin}},
	logstorepb.PlayerGroup_ListRegisteredTargets_FullMethodName: {},
	logstorepb.PlayerGroup_Heartbeat_FullMethodName:             {roles: []Role{RolePlayer}},
	logstorepb.PlayerGroup_LeaveGroup_FullMethodName:            {roles: []Role{RolePlayer}},
	logstorepb.PlayerGroup_DescribeGroup_FullMethodName:         {},

	playerpb.PlayerAdmin_AddTarget_FullMethodName:    {roles: []Role{RoleAdmin}},
	playerpb.PlayerAdmin_RemoveTarget_FullMethodName: {roles: []Role{RoleAdmin}},
	playerpb.PlayerAdmin_ListTargets_FullMethodName:  {roles: []Role{RoleAdmin, RolePlayer}},

	targetpb.Target_Deliver_FullMethodName: {roles: []Role{RolePlayer}},
	// A snapshot holds all the target's data (a player or an admin clones
	// it); a restore replaces an empty target's data and State: admin only.
	targetpb.Target_Snapshot_FullMethodName: {roles: []Role{RoleAdmin, RolePlayer}},
	targetpb.Target_Restore_FullMethodName:  {roles: []Role{RoleAdmin}},

	shardpb.Shard_Get_FullMethodName:         {roles: []Role{RoleConsumer}, check: checkShardRead},
	shardpb.Shard_Scan_FullMethodName:        {roles: []Role{RoleConsumer}, check: checkShardRead},
	shardpb.Shard_WaitApplied_FullMethodName: {roles: []Role{RoleConsumer}, check: checkShardRead},

	healthpb.Health_Check_FullMethodName: {public: true},
	healthpb.Health_List_FullMethodName:  {public: true},
	healthpb.Health_Watch_FullMethodName: {public: true},

	reflectionpb.ServerReflection_ServerReflectionInfo_FullMethodName:      {},
	reflectionalphapb.ServerReflection_ServerReflectionInfo_FullMethodName: {},
}

// checkOf adapts a check of one request type to a rule's check; another
// type (impossible: gRPC decoded the method's own type) is refused.
func checkOf[T proto.Message](f func(g *grantSet, r T) *denial) func(*Authorizer, *grantSet, proto.Message) *denial {
	return func(_ *Authorizer, g *grantSet, req proto.Message) *denial {
		r, ok := req.(T)
		if !ok {
			return deny("", "", "unexpected request type %T", req)
		}
		return f(g, r)
	}
}

func deny(topic, group, format string, args ...any) *denial {
	return &denial{topic: topic, group: group, msg: fmt.Sprintf(format, args...)}
}

// checkAppend: every slice's topic needs a producer grant; every offset
// commit and every group condition needs a consumer grant of the group
// (read-process-write commits its offsets in the transaction it produces);
// a plain condition needs the topic produced or read.
func checkAppend(g *grantSet, r *logstorepb.AppendRequest) *denial {
	for _, s := range r.GetSlices() {
		if !g.canProduce(s.GetTopic()) {
			return deny(s.GetTopic(), "", "no producer grant for topic %q", s.GetTopic())
		}
	}
	for _, c := range r.GetOffsetCommits() {
		if !g.canGroup(c.GetGroup()) {
			return deny("", c.GetGroup(), "no consumer grant for group %q", c.GetGroup())
		}
	}
	for _, c := range r.GetConditions() {
		switch {
		case c.GetGroup() != "":
			if !g.canGroup(c.GetGroup()) {
				return deny("", c.GetGroup(), "no consumer grant for group %q", c.GetGroup())
			}
		case !g.canProduce(c.GetTopic()) && !g.canRead(c.GetTopic()):
			return deny(c.GetTopic(), "", "no producer or consumer grant for topic %q", c.GetTopic())
		}
	}
	return nil
}

// checkAppendBatch refuses the whole batch when any request would be
// refused: nothing of it is written.
func checkAppendBatch(g *grantSet, r *logstorepb.AppendBatchRequest) *denial {
	for i, ar := range r.GetRequests() {
		if d := checkAppend(g, ar); d != nil {
			d.msg = fmt.Sprintf("request %d: %s", i, d.msg)
			return d
		}
	}
	return nil
}

// checkRead: a topic filter may name only readable topics. With no filter
// a consumer that may not read every topic still gets a stream: its
// responses carry only the slices it may read (filterRead), and
// read_through_lsn still reports how far it read.
func checkRead(g *grantSet, r *logstorepb.ReadRequest) *denial {
	for _, t := range r.GetTopics() {
		if !g.canRead(t) {
			return deny(t, "", "no consumer grant for topic %q", t)
		}
	}
	return nil
}

func checkReadTopic(g *grantSet, r *logstorepb.ReadTopicRequest) *denial {
	if !g.canRead(r.GetTopic()) {
		return deny(r.GetTopic(), "", "no consumer grant for topic %q", r.GetTopic())
	}
	return nil
}

func checkInitProducer(g *grantSet, r *logstorepb.InitProducerRequest) *denial {
	if !g.names.allows(r.GetName()) {
		return deny("", "", "no grant binds producer name %q to this identity", r.GetName())
	}
	return nil
}

func checkFetchOffsets(g *grantSet, r *logstorepb.FetchOffsetsRequest) *denial {
	if !g.canGroup(r.GetGroup()) {
		return deny("", r.GetGroup(), "no consumer grant for group %q", r.GetGroup())
	}
	return nil
}

// checkShardRead: a shard's data is what its topics delivered, so reading
// it needs a consumer grant of every topic the shard serves
// (Config.ShardTopics).
func checkShardRead(a *Authorizer, g *grantSet, _ proto.Message) *denial {
	if len(a.shardTopics) == 0 {
		return deny("", "", "this server has no shard topics configured, so no one may read it")
	}
	for _, t := range a.shardTopics {
		if !g.canRead(t) {
			return deny(t, "", "no consumer grant for shard topic %q", t)
		}
	}
	return nil
}

// filterReadResponse returns resp with only the slices (and offset commits)
// of topics a may read; transactions left empty are dropped, and
// read_through_lsn is kept, so the reader still learns how far it read.
// resp is never modified (the server may share it between streams).
func filterReadResponse(a *Access, resp *logstorepb.ReadResponse) *logstorepb.ReadResponse {
	out := &logstorepb.ReadResponse{ReadThroughLsn: resp.GetReadThroughLsn()}
	for _, txn := range resp.GetTransactions() {
		var slices []*logstorepb.TxnSlice
		for _, s := range txn.GetSlices() {
			if a.CanReadTopic(s.GetTopic()) {
				slices = append(slices, s)
			}
		}
		if len(slices) == 0 {
			continue
		}
		var commits []*logstorepb.OffsetCommit
		for _, c := range txn.GetOffsetCommits() {
			if a.CanReadTopic(c.GetTopic()) {
				commits = append(commits, c)
			}
		}
		out.Transactions = append(out.Transactions, &logstorepb.Transaction{
			Lsn:               txn.GetLsn(),
			RaftIndex:         txn.GetRaftIndex(),
			TimestampUnixNano: txn.GetTimestampUnixNano(),
			Slices:            slices,
			OffsetCommits:     commits,
		})
	}
	return out
}
