// Package fetchertest is an in-memory LogStore for tests of the fetcher and
// the LogPlayer: one shared log served by several gRPC "nodes" on loopback,
// each of which can be stopped or have its streams broken, so a test can
// exercise reconnects without a Raft cluster.
//
// It implements the subset of logstorepb.LogStoreServer the LogPlayer uses:
// Append, Read (follow or bounded range, topic filter, read_through_lsn,
// BELOW_RETENTION), NextEpoch, ReportConsumer and Status. Transactions can
// also be generated on demand (Generate) so a test can stream gigabytes
// without holding them in memory.
//
// Goroutines: one grpc.Server per node (gRPC's own goroutines); each Read call
// runs in its gRPC handler goroutine and waits on the store's change channel.
// Invariant: the log is dense, LSN i is txns[i-oldest] (or gen(i)), and
// head only grows, except through Restore (a backup restore).
package fetchertest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// defaultMaxBatch bounds transactions per ReadResponse when the request does
// not say; like the real server, small enough to keep a response far below
// gRPC's 4 MiB default message limit for KB-sized transactions.
const defaultMaxBatch = 256

// maxResponseBytes bounds the payload of one ReadResponse (the default gRPC
// receive limit is 4 MiB).
const maxResponseBytes = 1 << 20

// Store is a shared in-memory log.
type Store struct {
	mu struct {
		sync.Mutex
		txns      []*logstorepb.Transaction // LSN oldest+i; unused when gen != nil
		oldest    uint64                    // first retained LSN
		head      uint64                    // last LSN
		gen       func(lsn uint64) *logstorepb.Transaction
		changed   chan struct{} // closed and replaced whenever head grows
		epoch     uint64
		consumers map[string]uint64
		offsets   map[string]uint64 // next offset per topic
		// The log identity Status reports (LogStore log_cluster_id,
		// log_incarnation) and the cluster version.
		clusterID, incarnation string
		version                uint32
		// unregistered consumers' reports are refused (UNKNOWN_TARGET) and
		// counted here, as the real store refuses a removed target's.
		unregistered map[string]int
	}
	nodes []*Node
}

// Unregister makes reports for consumer fail with UNKNOWN_TARGET (as the
// LogStore answers a report for a target `target remove` removed) and
// drops its row.
func (s *Store) Unregister(consumer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.unregistered == nil {
		s.mu.unregistered = map[string]int{}
	}
	s.mu.unregistered[consumer] = 0
	delete(s.mu.consumers, consumer)
}

// RefusedReports is how many reports for consumer Unregister refused.
func (s *Store) RefusedReports(consumer string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.unregistered[consumer]
}

// New returns an empty store.
func New() *Store {
	s := &Store{}
	s.mu.oldest = 1
	s.mu.changed = make(chan struct{})
	s.mu.consumers = map[string]uint64{}
	s.mu.offsets = map[string]uint64{}
	return s
}

// Append commits one transaction of the given slices and returns its LSN.
func (s *Store) Append(slices ...*logstorepb.Slice) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.gen != nil {
		panic("fetchertest: Append on a generated store")
	}
	s.mu.head++
	txn := &logstorepb.Transaction{
		Lsn:               s.mu.head,
		RaftIndex:         s.mu.head,
		TimestampUnixNano: time.Now().UnixNano(),
	}
	for _, sl := range slices {
		txn.Slices = append(txn.Slices, &logstorepb.TxnSlice{
			Topic:       sl.Topic,
			FirstOffset: s.mu.offsets[sl.Topic],
			Messages:    sl.Messages,
		})
		s.mu.offsets[sl.Topic] += uint64(len(sl.Messages))
	}
	s.mu.txns = append(s.mu.txns, txn)
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	return txn.Lsn
}

// Generate switches the store to generated transactions: LSN i is gen(i) for
// every i <= head. The store must be empty. gen must be deterministic.
func (s *Store) Generate(gen func(lsn uint64) *logstorepb.Transaction) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.head != 0 {
		panic("fetchertest: Generate on a non-empty store")
	}
	s.mu.gen = gen
}

// SetHead makes every generated LSN up to head visible.
func (s *Store) SetHead(head uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.gen == nil || head < s.mu.head {
		panic(fmt.Sprintf("fetchertest: SetHead(%d) with head %d or no generator", head, s.mu.head))
	}
	s.mu.head = head
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// Truncate drops every LSN below oldest (retention), ignoring consumers.
func (s *Store) Truncate(oldest uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if oldest <= s.mu.oldest {
		return
	}
	if oldest > s.mu.head+1 {
		oldest = s.mu.head + 1
	}
	if s.mu.gen == nil {
		s.mu.txns = s.mu.txns[oldest-s.mu.oldest:]
	}
	s.mu.oldest = oldest
}

// SetLogIdentity sets the log identity and cluster version Status reports.
func (s *Store) SetLogIdentity(clusterID, incarnation string, version uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.clusterID, s.mu.incarnation, s.mu.version = clusterID, incarnation, version
}

// Restore is a backup restore: every LSN above head is gone (the next Append
// reuses them) and the incarnation changes. Appended stores only.
func (s *Store) Restore(head uint64, incarnation string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.gen != nil || head > s.mu.head || head+1 < s.mu.oldest {
		panic(fmt.Sprintf("fetchertest: Restore(%d) of head %d oldest %d (or generated)", head, s.mu.head, s.mu.oldest))
	}
	s.mu.txns = s.mu.txns[:head+1-s.mu.oldest]
	s.mu.head = head
	s.mu.incarnation = incarnation
	clear(s.mu.offsets)
	for _, txn := range s.mu.txns {
		for _, sl := range txn.Slices {
			s.mu.offsets[sl.Topic] = sl.FirstOffset + uint64(len(sl.Messages))
		}
	}
}

// Head returns the last committed LSN.
func (s *Store) Head() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.head
}

// Txn returns the transaction at lsn (nil when not retained).
func (s *Store) Txn(lsn uint64) *logstorepb.Transaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txnLocked(lsn)
}

func (s *Store) txnLocked(lsn uint64) *logstorepb.Transaction {
	if lsn < s.mu.oldest || lsn > s.mu.head {
		return nil
	}
	if s.mu.gen != nil {
		return s.mu.gen(lsn)
	}
	return s.mu.txns[lsn-s.mu.oldest]
}

// Consumers returns a copy of the reported delivery consumers.
func (s *Store) Consumers() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.mu.consumers))
	for k, v := range s.mu.consumers {
		out[k] = v
	}
	return out
}

// Epoch returns the last epoch handed out.
func (s *Store) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.epoch
}

// Node is one gRPC server over the shared store.
type Node struct {
	logstorepb.UnimplementedLogStoreServer
	store *Store
	srv   *grpc.Server
	lis   net.Listener
	addr  string

	reads   atomic.Int64 // Read calls in progress
	readsMu sync.Mutex
	cancels map[int]context.CancelFunc // live Read streams
	nextID  int
	stopped atomic.Bool
	role    atomic.Pointer[string] // Status role; nil: "leader"
	term    atomic.Uint64          // Status raft_term
	frozen  atomic.Pointer[uint64] // head this node is stuck at; nil: live
}

// Freeze makes the node stop seeing new transactions, like a follower cut
// off from its leader: its streams go silent and its Status head stays.
func (n *Node) Freeze() {
	h := n.store.Head()
	n.frozen.Store(&h)
}

// Thaw ends Freeze: the node sees the store's transactions again.
func (n *Node) Thaw() {
	s := n.store
	s.mu.Lock()
	defer s.mu.Unlock()
	n.frozen.Store(nil)
	close(s.mu.changed) // wake its Reads
	s.mu.changed = make(chan struct{})
}

// headLocked is the last LSN this node shows: the store's, or its frozen head.
func (n *Node) headLocked() uint64 {
	if f := n.frozen.Load(); f != nil {
		return min(*f, n.store.mu.head)
	}
	return n.store.mu.head
}

// SetRole sets the role and Raft term the node reports in Status ("leader",
// "follower").
func (n *Node) SetRole(role string, term uint64) {
	n.role.Store(&role)
	n.term.Store(term)
}

// StartNode serves the store on a new loopback port.
func (s *Store) StartNode() (*Node, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// Accept the LogPlayer's keepalive pings (a long idle follow stream
	// must not be cut with GOAWAY too_many_pings).
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}))
	n := &Node{store: s, srv: srv, lis: lis, addr: lis.Addr().String(), cancels: map[int]context.CancelFunc{}}
	logstorepb.RegisterLogStoreServer(n.srv, n)
	go func() { _ = n.srv.Serve(lis) }()
	s.nodes = append(s.nodes, n)
	return n, nil
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return n.addr }

// Reads returns how many Read streams the node is serving now.
func (n *Node) Reads() int64 { return n.reads.Load() }

// Stop closes the node's listener and every connection (like a crash as seen
// by clients).
func (n *Node) Stop() {
	n.stopped.Store(true)
	n.srv.Stop()
}

// BreakStreams ends every Read stream in progress with UNAVAILABLE.
func (n *Node) BreakStreams() {
	n.readsMu.Lock()
	defer n.readsMu.Unlock()
	for _, c := range n.cancels {
		c()
	}
}

func (n *Node) track(cancel context.CancelFunc) func() {
	n.readsMu.Lock()
	defer n.readsMu.Unlock()
	id := n.nextID
	n.nextID++
	n.cancels[id] = cancel
	n.reads.Add(1)
	return func() {
		n.readsMu.Lock()
		defer n.readsMu.Unlock()
		delete(n.cancels, id)
		n.reads.Add(-1)
	}
}

func statusErr(c codes.Code, code logstorepb.ErrorCode, oldest uint64, msg string) error {
	st, err := status.New(c, msg).WithDetails(&logstorepb.ErrorDetail{Code: code, OldestLsn: oldest})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// Append implements logstorepb.LogStoreServer.
func (n *Node) Append(_ context.Context, req *logstorepb.AppendRequest) (*logstorepb.AppendResponse, error) {
	if len(req.Slices) == 0 {
		return nil, statusErr(codes.InvalidArgument, logstorepb.ErrorCode_EMPTY_TRANSACTION, 0, "empty transaction")
	}
	lsn := n.store.Append(req.Slices...)
	return &logstorepb.AppendResponse{Lsn: lsn}, nil
}

// Read implements logstorepb.LogStoreServer.
func (n *Node) Read(req *logstorepb.ReadRequest, stream logstorepb.LogStore_ReadServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer n.track(cancel)()
	if req.FromLsn == 0 {
		return statusErr(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT, 0, "from_lsn must be >= 1")
	}
	want := map[string]bool{}
	for _, t := range req.Topics {
		want[t] = true
	}
	maxBatch := int(req.MaxBatch)
	if maxBatch == 0 {
		maxBatch = defaultMaxBatch
	}
	next := req.FromLsn
	s := n.store
	for {
		if req.ToLsn != 0 && next > req.ToLsn {
			return nil
		}
		if ctx.Err() != nil {
			return n.broken(stream)
		}
		s.mu.Lock()
		if next < s.mu.oldest {
			oldest := s.mu.oldest
			s.mu.Unlock()
			return statusErr(codes.OutOfRange, logstorepb.ErrorCode_BELOW_RETENTION, oldest,
				fmt.Sprintf("lsn %d is below retention (oldest %d)", next, oldest))
		}
		changed := s.mu.changed
		resp := &logstorepb.ReadResponse{}
		var bytes int
		for next <= n.headLocked() && (req.ToLsn == 0 || next <= req.ToLsn) &&
			len(resp.Transactions) < maxBatch && bytes < maxResponseBytes {
			txn := s.txnLocked(next)
			resp.ReadThroughLsn = next
			next++
			if len(want) != 0 {
				txn = filter(txn, want)
				if txn == nil {
					continue
				}
			}
			bytes += txnBytes(txn)
			resp.Transactions = append(resp.Transactions, txn)
		}
		s.mu.Unlock()
		if resp.ReadThroughLsn != 0 {
			if err := stream.Send(resp); err != nil {
				return err
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return n.broken(stream)
		}
	}
}

func (n *Node) broken(stream logstorepb.LogStore_ReadServer) error {
	if err := stream.Context().Err(); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "fetchertest: stream broken")
}

func txnBytes(txn *logstorepb.Transaction) int {
	var b int
	for _, sl := range txn.Slices {
		for _, m := range sl.Messages {
			b += len(m.Value) + len(m.Key)
		}
	}
	return b
}

func filter(txn *logstorepb.Transaction, want map[string]bool) *logstorepb.Transaction {
	var slices []*logstorepb.TxnSlice
	for _, sl := range txn.Slices {
		if want[sl.Topic] {
			slices = append(slices, sl)
		}
	}
	if len(slices) == 0 {
		return nil
	}
	return &logstorepb.Transaction{Lsn: txn.Lsn, RaftIndex: txn.RaftIndex, TimestampUnixNano: txn.TimestampUnixNano, Slices: slices}
}

// NextEpoch implements logstorepb.LogStoreServer.
func (n *Node) NextEpoch(context.Context, *logstorepb.NextEpochRequest) (*logstorepb.NextEpochResponse, error) {
	s := n.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.epoch++
	return &logstorepb.NextEpochResponse{Epoch: s.mu.epoch}, nil
}

// ReportConsumer implements logstorepb.LogStoreServer.
func (n *Node) ReportConsumer(_ context.Context, req *logstorepb.ReportConsumerRequest) (*logstorepb.ReportConsumerResponse, error) {
	if req.Consumer == "" {
		return nil, statusErr(codes.InvalidArgument, logstorepb.ErrorCode_INVALID_ARGUMENT, 0, "empty consumer")
	}
	s := n.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.unregistered[req.Consumer]; ok && !req.Remove {
		s.mu.unregistered[req.Consumer]++
		return nil, statusErr(codes.NotFound, logstorepb.ErrorCode_UNKNOWN_TARGET, 0, "target is not registered")
	}
	if req.Remove {
		delete(s.mu.consumers, req.Consumer)
	} else {
		s.mu.consumers[req.Consumer] = req.AckedLsn
	}
	return &logstorepb.ReportConsumerResponse{}, nil
}

// Status implements logstorepb.LogStoreServer.
func (n *Node) Status(context.Context, *logstorepb.StatusRequest) (*logstorepb.StatusResponse, error) {
	s := n.store
	s.mu.Lock()
	defer s.mu.Unlock()
	role := "leader"
	if r := n.role.Load(); r != nil {
		role = *r
	}
	return &logstorepb.StatusResponse{NodeId: n.addr, Role: role, RaftTerm: n.term.Load(), HeadLsn: n.headLocked(), FirstLsn: s.mu.oldest, Epoch: s.mu.epoch,
		LogClusterId: s.mu.clusterID, LogIncarnation: s.mu.incarnation, ClusterVersion: s.mu.version}, nil
}
