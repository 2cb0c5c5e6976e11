package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Backup streams a snapshot-consistent backup archive from the leader (see
// logstore's Cluster.Backup): open is called once with the archive's info,
// and the archive's bytes are written to what it returns. Finding the
// leader and starting the stream are retried as any idempotent call; the
// transfer itself is bounded by ctx only (not by Config.AttemptTimeout: a
// large log takes longer) and is not retried.
func (c *Client) Backup(ctx context.Context, open func(*logstorepb.BackupInfo) (io.Writer, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var st grpc.ServerStreamingClient[logstorepb.BackupChunk]
	var info *logstorepb.BackupInfo
	err := c.call(ctx, true, func(actx context.Context, cc *grpc.ClientConn) error {
		s, err := logstorepb.NewClusterClient(cc).Backup(ctx, &logstorepb.BackupRequest{})
		if err != nil {
			return err
		}
		first, err := recvWithin(actx, s)
		if err != nil {
			return err
		}
		if first.Info == nil {
			return fmt.Errorf("client: backup stream without info")
		}
		st, info = s, first.Info
		return nil
	})
	if err != nil {
		return err
	}
	w, err := open(info)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := w.Write(m.Data); err != nil {
			return err
		}
	}
}

// recvWithin receives s's first message, giving up when actx ends (the
// stream itself lives on the caller's context).
func recvWithin(actx context.Context, s grpc.ServerStreamingClient[logstorepb.BackupChunk]) (*logstorepb.BackupChunk, error) {
	type result struct {
		m   *logstorepb.BackupChunk
		err error
	}
	ch := make(chan result, 1)
	go func() { m, err := s.Recv(); ch <- result{m, err} }()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-actx.Done():
		return nil, actx.Err()
	}
}
