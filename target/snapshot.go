package target

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// Snapshot and Restore (issue #29: bootstrap a new target from a sibling).
// docs/ARCHITECTURE.md "Bootstrapping a target from a sibling" has the
// design; the Target service's Snapshot and Restore RPCs carry it.

// Snapshotter is the optional interface of a Store that can hand out a
// consistent copy of its data and seed an empty store from one. A Server
// whose Store implements it answers the Snapshot and Restore RPCs;
// otherwise they answer UNIMPLEMENTED with SNAPSHOT_UNSUPPORTED.
type Snapshotter interface {
	// SnapshotFormat names the encoding of the store's snapshots, with a
	// version ("shard/bbolt/1"). Restore accepts only its own format.
	SnapshotFormat() string

	// Snapshot takes one consistent snapshot: inside one read transaction
	// it calls begin with the State the data is consistent with, then
	// writes the data to the writer begin returned. An error from begin or
	// from the writer ends it. Unlike the other Store methods, the SDK
	// calls Snapshot from the RPC's goroutine, concurrently with Apply: the
	// store's read transaction isolates it.
	Snapshot(ctx context.Context, begin func(State) (io.Writer, error)) error

	// Restore reads a snapshot of its own format from r into a staging
	// area (discarding what an earlier, interrupted Restore left there)
	// and, only when r ends with io.EOF, atomically replaces the store's
	// data and State with it, returning the State it now holds. st is the
	// snapshot's State as its header says, except Epoch, which the SDK
	// raises to the store's own when that is higher (the epoch never goes
	// back); the store checks that the staged data says the same
	// (ErrSnapshotMismatch otherwise). Any error from r (the stream broke,
	// the data does not match its SnapshotEnd) leaves the store as it was.
	// A store holding data or an applied LSN refuses with ErrNotEmpty and
	// changes nothing. The SDK calls Restore from its applier goroutine
	// (never concurrently with Apply or State), with no stream delivering.
	Restore(ctx context.Context, st State, r io.Reader) (State, error)
}

// Errors of Snapshotter implementations, mapped to the RPCs' ErrorCodes.
var (
	// ErrNotEmpty: Restore into a store that holds data or an applied LSN
	// (TARGET_NOT_EMPTY).
	ErrNotEmpty = errors.New("target: store is not empty")
	// ErrSnapshotMismatch: a snapshot of another format, or whose data
	// disagrees with its header or its end marker (SNAPSHOT_MISMATCH).
	ErrSnapshotMismatch = errors.New("target: snapshot does not match")
	// ErrSnapshotUnsupported: a Snapshotter that cannot snapshot as
	// configured (a SQL store without its tables) (SNAPSHOT_UNSUPPORTED).
	ErrSnapshotUnsupported = errors.New("target: snapshots not supported as configured")
)

// snapshotChunkBytes is the size of one Snapshot data chunk: well below
// gRPC's default 4 MiB message limit, large enough that the per-message
// overhead does not matter.
const snapshotChunkBytes = 1 << 20

// Refusal reasons of Snapshot and Restore (target_refusals_total).
const (
	reasonNotEmpty    = "not_empty"    // Restore into a target that holds data
	reasonUnsupported = "unsupported"  // the Store is not a Snapshotter
	reasonMismatch    = "mismatch"     // snapshot of another format, or corrupt
	reasonRestored    = "restored"     // the active stream ended by a Restore
	reasonSnapshotArg = "snapshot_arg" // malformed Snapshot or Restore request
)

// StateToProto and StateFromProto convert a State to and from its wire
// form (targetpb.TargetState), topics sorted by name.
func StateToProto(st State) *targetpb.TargetState {
	out := &targetpb.TargetState{AppliedLsn: uint64(st.AppliedLSN), Epoch: uint64(st.Epoch),
		LogClusterId: st.LogClusterID, LogIncarnation: st.LogIncarnation}
	for topic, next := range st.Topics {
		out.Topics = append(out.Topics, &targetpb.TopicOffset{Topic: topic, NextOffset: uint64(next)})
	}
	slices.SortFunc(out.Topics, func(a, b *targetpb.TopicOffset) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// StateFromProto is the inverse of StateToProto.
func StateFromProto(p *targetpb.TargetState) State {
	st := State{AppliedLSN: types.LSN(p.GetAppliedLsn()), Epoch: types.Epoch(p.GetEpoch()), Topics: map[string]types.Offset{},
		LogClusterID: p.GetLogClusterId(), LogIncarnation: p.GetLogIncarnation()}
	for _, t := range p.GetTopics() {
		st.Topics[t.Topic] = types.Offset(t.NextOffset)
	}
	return st
}

// SameData reports whether a and b describe the same data: applied LSN,
// topic offsets and log identity (not the epoch, a fencing floor).
func SameData(a, b State) bool {
	return a.AppliedLSN == b.AppliedLSN && a.LogClusterID == b.LogClusterID &&
		a.LogIncarnation == b.LogIncarnation && maps.Equal(a.Topics, b.Topics)
}

// Snapshot implements targetpb.TargetServer: a consistent snapshot of the
// Store's data, streamed as a header, data chunks and an end marker.
func (s *Server) Snapshot(req *targetpb.SnapshotRequest, ss targetpb.Target_SnapshotServer) error {
	snap, r := s.snapshotter(req.TargetId)
	if r != nil {
		s.countRefusal(nil, r)
		return r.status()
	}
	w := &chunkWriter{send: ss.Send, crc: crc32.New(castagnoli)}
	var st State
	err := snap.Snapshot(ss.Context(), func(got State) (io.Writer, error) {
		st = got
		hdr := &targetpb.SnapshotHeader{TargetId: string(s.cfg.TargetID), Format: snap.SnapshotFormat(), State: StateToProto(got)}
		return w, ss.Send(&targetpb.SnapshotChunk{Kind: &targetpb.SnapshotChunk_Header{Header: hdr}})
	})
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		err = ss.Send(&targetpb.SnapshotChunk{Kind: &targetpb.SnapshotChunk_End{End: &targetpb.SnapshotEnd{Bytes: w.n, Crc32C: w.crc.Sum32()}}})
	}
	if err != nil {
		if ss.Context().Err() != nil {
			return ss.Context().Err()
		}
		r := s.storeFailure(fmt.Errorf("snapshot: %w", err))
		if errors.Is(err, ErrSnapshotUnsupported) {
			r = refuse(reasonUnsupported, logstorepb.ErrorCode_SNAPSHOT_UNSUPPORTED, beforeHello(), "target %s: %v", s.cfg.TargetID, err)
		}
		s.countRefusal(nil, r)
		return r.status()
	}
	s.log.Info("snapshot sent", "lsn", st.AppliedLSN, "bytes", w.n)
	return nil
}

// snapshotter checks a Snapshot or Restore's target id and returns the
// Store as a Snapshotter.
func (s *Server) snapshotter(id string) (Snapshotter, *refusal) {
	if id != string(s.cfg.TargetID) {
		return nil, refuse(reasonWrongTarget, logstorepb.ErrorCode_WRONG_TARGET, beforeHello(),
			"this is target %q, not %q", s.cfg.TargetID, id)
	}
	snap, ok := s.cfg.Store.(Snapshotter)
	if !ok {
		return nil, refuse(reasonUnsupported, logstorepb.ErrorCode_SNAPSHOT_UNSUPPORTED, beforeHello(),
			"target %s: its store (%T) does not implement target.Snapshotter", s.cfg.TargetID, s.cfg.Store)
	}
	return snap, nil
}

// Restore implements targetpb.TargetServer: it seeds this empty target
// from a snapshot. The Store's Restore runs on the applier goroutine (so no
// Apply runs meanwhile); the active stream, if any, is ended so that the
// LogPlayer handshakes again and learns the restored applied LSN.
func (s *Server) Restore(rs targetpb.Target_RestoreServer) error {
	first, err := rs.Recv()
	if err != nil {
		return err
	}
	snap, r := s.snapshotter(first.TargetId)
	if r == nil {
		r = s.checkRestoreHeader(snap, first.GetChunk().GetHeader())
	}
	if r != nil {
		s.countRefusal(nil, r)
		return r.status()
	}
	hdr := first.Chunk.GetHeader()
	cr := &chunkReader{recv: func() (*targetpb.SnapshotChunk, error) { return s.recvChunk(rs) }, crc: crc32.New(castagnoli)}
	type result struct {
		st State
		r  *refusal
	}
	done := make(chan result, 1) // written once by the applier
	it := &item{run: func() {
		st, r := s.restore(rs.Context(), snap, StateFromProto(hdr.State), cr)
		done <- result{st, r}
	}}
	select {
	case s.queue <- it:
	case <-rs.Context().Done():
		return rs.Context().Err()
	case <-s.quit:
		return errShuttingDown.status()
	}
	var res result
	select {
	case res = <-done:
	case <-s.applierDone: // Close: the applier stopped, perhaps before taking it
		select {
		case res = <-done:
		default:
			return errShuttingDown.status()
		}
	}
	if res.r != nil {
		s.countRefusal(nil, res.r)
		return res.r.status()
	}
	s.log.Info("restored from a snapshot", "from", hdr.TargetId, "lsn", res.st.AppliedLSN, "epoch", res.st.Epoch,
		"bytes", cr.n)
	return rs.SendAndClose(&targetpb.RestoreResponse{State: StateToProto(res.st)})
}

// recvChunk receives the next Restore chunk, or fails when the Server
// closes: the Store's Restore blocks the applier goroutine while it reads,
// and Close waits for the applier, so a client that streams slowly (or
// stalls) must not hold a shutdown. The receive that Close abandons ends
// with the RPC, which ends when the handler returns.
func (s *Server) recvChunk(rs targetpb.Target_RestoreServer) (*targetpb.SnapshotChunk, error) {
	type received struct {
		c   *targetpb.SnapshotChunk
		err error
	}
	got := make(chan received, 1) // written once by the receiving goroutine
	go func() {
		req, err := rs.Recv()
		got <- received{req.GetChunk(), err}
	}()
	select {
	case r := <-got:
		return r.c, r.err
	case <-s.quit:
		return nil, errShuttingDown
	}
}

// checkRestoreHeader checks the first Restore chunk: a header of the
// Store's own format.
func (s *Server) checkRestoreHeader(snap Snapshotter, hdr *targetpb.SnapshotHeader) *refusal {
	switch {
	case hdr == nil || hdr.State == nil:
		return refuse(reasonSnapshotArg, logstorepb.ErrorCode_INVALID_ARGUMENT, beforeHello(),
			"the first Restore request must carry the snapshot's header with its State")
	case hdr.Format != snap.SnapshotFormat():
		return refuse(reasonMismatch, logstorepb.ErrorCode_SNAPSHOT_MISMATCH, beforeHello(),
			"snapshot format %q, this target's store restores %q", hdr.Format, snap.SnapshotFormat())
	}
	return nil
}

// restore runs on the applier goroutine: it checks that the target is
// empty, lets the Store restore, installs the new State and ends the
// active stream.
func (s *Server) restore(ctx context.Context, snap Snapshotter, st State, r io.Reader) (State, *refusal) {
	if rf := s.loadState(); rf != nil {
		return State{}, rf
	}
	cur := s.ap.st
	if cur.AppliedLSN != 0 || len(cur.Topics) != 0 {
		return State{}, notEmpty(cur.AppliedLSN, "target %s holds applied lsn %d and topics %v: a Restore seeds only an empty target",
			s.cfg.TargetID, cur.AppliedLSN, cur.Topics)
	}
	st.Epoch = max(st.Epoch, cur.Epoch)
	got, err := snap.Restore(ctx, st, r)
	if err != nil {
		s.ap.stale = true // what the Store holds now is read back before the next use
		switch {
		case errors.Is(err, ErrNotEmpty):
			return State{}, notEmpty(0, "target %s: %v", s.cfg.TargetID, err)
		case errors.Is(err, ErrSnapshotMismatch):
			return State{}, refuse(reasonMismatch, logstorepb.ErrorCode_SNAPSHOT_MISMATCH, beforeHello(),
				"target %s: %v; nothing restored", s.cfg.TargetID, err)
		case errors.Is(err, ErrSnapshotUnsupported):
			return State{}, refuse(reasonUnsupported, logstorepb.ErrorCode_SNAPSHOT_UNSUPPORTED, beforeHello(),
				"target %s: %v", s.cfg.TargetID, err)
		case ctx.Err() != nil:
			return State{}, refuse("", logstorepb.ErrorCode_INVALID_ARGUMENT, beforeHello(),
				"target %s: the Restore stream ended before its end marker (%v); nothing restored", s.cfg.TargetID, err)
		}
		return State{}, s.storeFailure(fmt.Errorf("restore: %w", err))
	}
	s.setState(got.Clone())
	s.ap.session = 0
	if a := s.ap.active; a != nil && !a.isEnded() {
		rf := refuse(reasonRestored, logstorepb.ErrorCode_CONTINUITY, &logstorepb.ErrorDetail{AppliedLsn: uint64(got.AppliedLSN)},
			"the target was restored from a snapshot at lsn %d: handshake again", got.AppliedLSN)
		s.countRefusal(a, rf)
		a.end(rf.status())
	}
	s.ap.active = nil
	return got, nil
}

func notEmpty(lsn types.LSN, format string, args ...any) *refusal {
	return refuse(reasonNotEmpty, logstorepb.ErrorCode_TARGET_NOT_EMPTY,
		&logstorepb.ErrorDetail{AppliedLsn: uint64(lsn), Applied: logstorepb.Applied_APPLIED_NO}, format, args...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunkWriter cuts what a Store's Snapshot writes into data chunks of
// snapshotChunkBytes, counting the bytes and their CRC-32C.
type chunkWriter struct {
	send func(*targetpb.SnapshotChunk) error
	buf  []byte
	n    uint64
	crc  hash.Hash32
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		k := min(len(p), snapshotChunkBytes-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == snapshotChunkBytes {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.n += uint64(len(w.buf))
	_, _ = w.crc.Write(w.buf)
	err := w.send(&targetpb.SnapshotChunk{Kind: &targetpb.SnapshotChunk_Data{Data: w.buf}})
	w.buf = make([]byte, 0, snapshotChunkBytes) // the sent message may still hold the old one
	return err
}

// chunkReader is the data of a Restore stream as an io.Reader: io.EOF only
// after an end marker whose size and CRC-32C match the data read;
// ErrSnapshotMismatch when they do not; io.ErrUnexpectedEOF when the
// stream ends without one.
type chunkReader struct {
	recv func() (*targetpb.SnapshotChunk, error)
	buf  []byte
	n    uint64
	crc  hash.Hash32
	err  error // sticky
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.next()
	}
	k := copy(p, r.buf)
	r.buf = r.buf[k:]
	return k, nil
}

// next takes the next chunk: data into buf, or the end (r.err set).
func (r *chunkReader) next() error {
	c, err := r.recv()
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the snapshot stream ended after %d bytes without its end marker", io.ErrUnexpectedEOF, r.n)
	case err != nil:
		return err
	}
	switch k := c.GetKind().(type) {
	case *targetpb.SnapshotChunk_Data:
		r.buf = k.Data
		r.n += uint64(len(k.Data))
		_, _ = r.crc.Write(k.Data)
		return nil
	case *targetpb.SnapshotChunk_End:
		if k.End.Bytes != r.n || k.End.Crc32C != r.crc.Sum32() {
			return fmt.Errorf("%w: the data is %d bytes with CRC-32C %08x, its end marker says %d bytes %08x",
				ErrSnapshotMismatch, r.n, r.crc.Sum32(), k.End.Bytes, k.End.Crc32C)
		}
		return io.EOF
	}
	return fmt.Errorf("%w: unexpected chunk %T after the header", ErrSnapshotMismatch, c.GetKind())
}
