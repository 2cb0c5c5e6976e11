package logstore

import (
	"sync"

	"github.com/hashicorp/raft"
)

// raftTransport is the node's Raft transport: hashicorp/raft's
// NetworkTransport (all of its methods, so raft still finds
// raft.WithPreVote and raft.WithClose on it) whose AppendEntries
// pipelines are drainingPipelines. Pipelining stays on (it is worth 8-15%
// of throughput at 64 clients over MaxRPCsInFlight = 1).
type raftTransport struct{ *raft.NetworkTransport }

var (
	_ raft.WithPreVote = (*raftTransport)(nil)
	_ raft.WithClose   = (*raftTransport)(nil)
)

// newRaftTransport is the node's Raft transport over cfg.Stream.
func newRaftTransport(cfg *raft.NetworkTransportConfig) *raftTransport {
	return &raftTransport{raft.NewNetworkTransportWithConfig(cfg)}
}

// AppendEntriesPipeline wraps the NetworkTransport's pipeline in a
// drainingPipeline.
func (t *raftTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainingPipeline(p), nil
}

// drainingPipeline keeps reading an AppendPipeline's responses after
// hashicorp/raft (v1.7.3) has stopped reading them, so that Raft's
// replication goroutine cannot block for ever and raft.Shutdown (hence
// Node.Close) cannot hang.
//
// The path, in the raft module's source: replication.go:pipelineDecode is
// the only reader of the pipeline's Consumer channel, and it returns, without
// reading again, after the first response with a higher term
// (handleStaleTerm) or without Success. net_transport.go:netPipeline's
// decodeResponses goroutine then decodes the next response and blocks
// sending it on doneCh (unbuffered with the default MaxRPCsInFlight of 2),
// so it no longer takes requests from inprogressCh; and
// replication.go:pipelineReplicate, which sends before it sees
// pipelineDecode's finishCh closed (its select picks triggerCh or the
// commit timeout as readily), blocks in netPipeline.AppendEntries sending
// on inprogressCh. Only netPipeline.Close unblocks either, and that is
// pipelineReplicate's own deferred call; stopCh and raft's shutdownCh are
// not watched there. raft.Shutdown waits for every goroutine of raft, so
// it waits for ever.
//
// The wrapper forwards the inner pipeline's responses to its own Consumer
// channel, one at a time, and after forwarding a response on which
// pipelineDecode returns (the same test: resp.Term > req.Term or
// !resp.Success) discards every later one, so decodeResponses keeps
// taking requests and pipelineReplicate gets back to its loop, sees
// finishCh and closes the pipeline. The hop lets one more decoded response
// wait for pipelineDecode than netPipeline alone does; requests written
// but unanswered stay bounded by the inner pipeline as before.
// Test: rafttransport_test.go:TestRaftShutdownAfterPipelineStaleTerm.
type drainingPipeline struct {
	raft.AppendPipeline
	out       chan raft.AppendFuture
	closed    chan struct{}
	closeOnce sync.Once
	ended     chan struct{} // closed when forward returns
}

func newDrainingPipeline(p raft.AppendPipeline) *drainingPipeline {
	d := &drainingPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture),
		closed: make(chan struct{}), ended: make(chan struct{})}
	go d.forward()
	return d
}

// forward runs until Close: it hands each response to Consumer's reader
// until pipelineDecode's last one, then discards the rest.
func (d *drainingPipeline) forward() {
	defer close(d.ended)
	in := d.AppendPipeline.Consumer()
	draining := false
	for {
		select {
		case f := <-in:
			if draining {
				continue
			}
			// Read before the hand-off: pipelineDecode owns f after it.
			req, resp := f.Request(), f.Response()
			last := resp.Term > req.Term || !resp.Success
			select {
			case d.out <- f:
			case <-d.closed:
				return
			}
			draining = last
		case <-d.closed:
			return
		}
	}
}

// Consumer is where raft reads the pipeline's responses.
func (d *drainingPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close closes the inner pipeline and ends forward.
func (d *drainingPipeline) Close() error {
	err := d.AppendPipeline.Close()
	d.closeOnce.Do(func() { close(d.closed) })
	return err
}
