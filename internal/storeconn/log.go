package storeconn

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// A Cursor is the position of a log read over (from, to]: the next LSN it
// needs. Take moves it past a response only when the response is the
// continuation of the position, so that a stream reopened from Next reads
// every LSN once:
//   - transactions strictly increase from Next on (exactly Next, Next+1, …
//     when the read is not filtered by topic) and stay within To;
//   - read_through_lsn covers at least Next, is not below the last
//     transaction, not beyond To, and (unfiltered) equals the last one.
//
// Next then becomes read_through_lsn+1 (a filtered read skips what held
// none of its topics).
type Cursor struct {
	next     types.LSN
	to       types.LSN // 0: forever
	filtered bool
}

// NewCursor returns the cursor of a read from LSN from through to (0:
// forever); filtered reads leave out transactions (a topic filter).
func NewCursor(from, to types.LSN, filtered bool) Cursor {
	return Cursor{next: from, to: to, filtered: filtered}
}

// Next returns the next LSN the read needs.
func (c *Cursor) Next() types.LSN { return c.next }

// Done reports whether the read is through To.
func (c *Cursor) Done() bool { return c.to != 0 && c.next > c.to }

// ContinuityError says how a response broke a Cursor's rules (a LogStore
// bug); the cursor did not move.
type ContinuityError struct {
	Next types.LSN // the cursor's position
	Want types.LSN // the lowest (unfiltered: the only) LSN acceptable at the fault
	// Got is the transaction at fault; 0 when read_through_lsn is.
	Got         types.LSN
	ReadThrough types.LSN
	To          types.LSN
}

func (e *ContinuityError) Error() string {
	if e.Got != 0 {
		return fmt.Sprintf("storeconn: got lsn %d, want lsn %d (position %d, to %d)", e.Got, e.Want, e.Next, e.To)
	}
	return fmt.Sprintf("storeconn: read through lsn %d (position %d, next transaction %d, to %d)", e.ReadThrough, e.Next, e.Want, e.To)
}

// Take checks resp against the cursor and moves the cursor past it, or
// returns a *ContinuityError and leaves it.
func (c *Cursor) Take(resp *logstorepb.ReadResponse) error {
	want := c.next
	rt := types.LSN(resp.ReadThroughLsn)
	for _, txn := range resp.Transactions {
		lsn := types.LSN(txn.Lsn)
		if lsn < want || (!c.filtered && lsn != want) || (c.to != 0 && lsn > c.to) {
			return &ContinuityError{Next: c.next, Want: want, Got: lsn, ReadThrough: rt, To: c.to}
		}
		want = lsn + 1
	}
	if rt < c.next || rt+1 < want || (!c.filtered && rt+1 != want) || (c.to != 0 && rt > c.to) {
		return &ContinuityError{Next: c.next, Want: want, ReadThrough: rt, To: c.to}
	}
	c.next = rt + 1
	return nil
}

// LogOpener opens a Read stream on node for req (LogReader's default:
// ls.Read).
type LogOpener func(ctx context.Context, node int, ls logstorepb.LogStoreClient, req *logstorepb.ReadRequest) (recv func() (*logstorepb.ReadResponse, error), err error)

// A LogReader follows the log (a Read request) over a Conn's nodes from a
// Cursor: after a failure it reopens the stream on another node from the
// cursor's position. Not safe for concurrent use; Close it when done.
type LogReader struct {
	s   *Stream[*logstorepb.ReadResponse]
	cur Cursor
}

// NewLogReader returns a reader of req (FromLsn to ToLsn, 0: forever, its
// topics and batch size); open may be nil. It connects on the first Next.
func NewLogReader(c *Conn, p StreamPolicy, req *logstorepb.ReadRequest, open LogOpener) *LogReader {
	if open == nil {
		open = func(ctx context.Context, _ int, ls logstorepb.LogStoreClient, req *logstorepb.ReadRequest) (func() (*logstorepb.ReadResponse, error), error) {
			return Recv(ls.Read(ctx, req))
		}
	}
	tmpl := proto.Clone(req).(*logstorepb.ReadRequest)
	r := &LogReader{cur: NewCursor(types.LSN(req.FromLsn), types.LSN(req.ToLsn), len(req.Topics) != 0)}
	r.s = NewStream(c, p, func(ctx context.Context, node int, ls logstorepb.LogStoreClient) (func() (*logstorepb.ReadResponse, error), error) {
		req := proto.Clone(tmpl).(*logstorepb.ReadRequest)
		req.FromLsn = uint64(r.cur.Next())
		return open(ctx, node, ls, req)
	})
	r.s.where = func() any { return r.cur.Next() }
	return r
}

// Position returns the next LSN the reader needs.
func (r *LogReader) Position() types.LSN { return r.cur.Next() }

// Node returns the node of the open (or last) stream.
func (r *LogReader) Node() int { return r.s.Node() }

// Next returns the next response, checked and taken by the cursor. It
// returns io.EOF once the read is through ToLsn, a *ContinuityError (the
// stream is closed, the position unchanged), a failure the policy does not
// retry (below retention included: see apierr.BelowRetention), or ctx's
// error (the position is unchanged: calling Next again continues).
func (r *LogReader) Next(ctx context.Context) (*logstorepb.ReadResponse, error) {
	for {
		if r.cur.Done() {
			r.s.Close()
			return nil, io.EOF
		}
		resp, err := r.s.Next(ctx)
		if errors.Is(err, io.EOF) {
			continue // a stream that ended before ToLsn: reopen from the cursor
		}
		if err != nil {
			return nil, err
		}
		if err := r.cur.Take(resp); err != nil {
			r.s.Close()
			return nil, err
		}
		return resp, nil
	}
}

// Close ends the reader's stream.
func (r *LogReader) Close() { r.s.Close() }
