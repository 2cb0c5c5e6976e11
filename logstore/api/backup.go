package api

import (
	"errors"
	"fmt"
	"io"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// BackupChunkBytes is the archive bytes of one BackupChunk (the node's
// backup files are written and read in buffers of this size too).
const BackupChunkBytes = 256 << 10

// Backup implements the Cluster service's Backup: a snapshot-consistent
// archive of the leader (followers answer NOT_LEADER, so the backup holds
// every write acknowledged before it started), taken without stopping writes (segment.Checkpoint
// hard-links sealed segments and copies the active one's prefix; the node
// takes it: Node.OpenBackup).
func (s *server) Backup(_ *logstorepb.BackupRequest, stream logstorepb.Cluster_BackupServer) error {
	if err := s.leaderOnly(); err != nil {
		return err
	}
	info, rc, err := s.node.OpenBackup()
	if err != nil {
		return apierr.Status(fmt.Errorf("backup: %w", err))
	}
	defer rc.Close()
	if err := stream.Send(&logstorepb.BackupChunk{Info: info}); err != nil {
		return err
	}
	buf := make([]byte, BackupChunkBytes)
	for {
		n, err := io.ReadFull(rc, buf)
		if n > 0 {
			if serr := stream.Send(&logstorepb.BackupChunk{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return apierr.Status(fmt.Errorf("backup: %w", err))
		}
	}
}
