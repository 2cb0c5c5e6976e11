package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Backup streams a snapshot-consistent backup archive from the leader:
// open is called with the archive's info each time a stream starts (a retry
// starts over, so open must truncate what an earlier attempt wrote), and
// the archive's bytes are written to what it returns.
func (c *Client) Backup(ctx context.Context, open func(*logstorepb.BackupInfo) (io.Writer, error)) error {
	return c.call(ctx, true, func(ctx context.Context, cc *grpc.ClientConn) error {
		st, err := logstorepb.NewClusterClient(cc).Backup(ctx, &logstorepb.BackupRequest{})
		if err != nil {
			return err
		}
		first, err := st.Recv()
		if err != nil {
			return err
		}
		if first.Info == nil {
			return fmt.Errorf("client: backup stream without info")
		}
		w, err := open(first.Info)
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
	})
}
