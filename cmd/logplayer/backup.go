package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

type backupCmd struct {
	op      string
	conn    cli.ClientFlags
	file    string
	dataDir string
	peers   cli.PeerList
}

func (c *backupCmd) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.file, "file", "", "the backup `file`")
	switch c.op {
	case "save":
		c.conn.Register(fs)
	case "restore":
		fs.StringVar(&c.dataDir, "data-dir", "", "the new node's data `directory` (missing or empty)")
		fs.Var(&c.peers, "peer", "a voter of the new cluster `ID=RAFT_ADDR/API_ADDR` (repeat for each)")
	}
}

func (c *backupCmd) Run(ctx context.Context, s *cli.Sys) error {
	if c.op == "restore" {
		info, err := logstore.RestoreBackup(c.file, c.dataDir, logstorePeers(c.peers))
		if err != nil {
			return err
		}
		fmt.Fprintf(s.Stdout, "restored %s into %s: lsn %d..%d, raft index %d\n", c.file, c.dataDir, info.FirstLSN, info.LastLSN, info.RaftIndex)
		return nil
	}
	info, err := c.save(ctx, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Stdout, "backup %s: lsn %d..%d, raft index %d, %d archive bytes\n", c.file, info.FirstLSN, info.LastLSN, info.RaftIndex, info.ArchiveBytes)
	return nil
}

// save streams a backup from the cluster into --file (logstore.SaveBackup).
func (c *backupCmd) save(ctx context.Context, s *cli.Sys) (logstore.BackupInfo, error) {
	cl, err := c.conn.Dial(s)
	if err != nil {
		return logstore.BackupInfo{}, err
	}
	defer cl.Close()
	return logstore.SaveBackup(c.file, func(open func(*logstorepb.BackupInfo) (io.Writer, error)) error {
		ctx, cancel := context.WithTimeout(ctx, c.conn.Timeout)
		defer cancel()
		if err := cl.Backup(ctx, open); err != nil {
			return c.conn.Describe(ctx, "backup", err)
		}
		return nil
	})
}
