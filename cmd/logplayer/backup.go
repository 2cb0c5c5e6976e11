package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func init() {
	register(&command{
		name:     "backup save",
		summary:  "write a consistent backup of a running cluster to a file",
		synopsis: "--file FILE [--addr LIST]",
		about: `
Asks the leader for a snapshot-consistent backup (retained segments, the FSM
state: producers, consumer offsets, epochs, members; the LSN it is consistent
at) without stopping writes, and writes it to --file atomically (a temporary
file, fsync, rename). The file has a header (format version, LSN range, Raft
index) and a CRC-32C; each segment file's CRC is in its manifest.`,
		examples: []string{"logplayer backup save --file backup-$(date +%F).lpb"},
		required: []string{"file"},
		new:      func() runner { return &backupCmd{op: "save"} },
	})
	register(&command{
		name:     "backup restore",
		summary:  "seed a new node's data directory from a backup file",
		synopsis: "--file FILE --data-dir DIR --peer ID=RAFT/API [--peer ...]",
		about: `
Reads the file once and checks every part while it copies it (header,
length, checksum, the snapshot header's checksum, the manifest's file names
and LSN contiguity, every segment's CRC) into the empty --data-dir as the
node's snapshot, with the --peer list as the new cluster's voters; a file
that fails a check leaves --data-dir as it was. Restore
every node of the new cluster from the same file with the same --peer list
and start them with 'logplayer store' (same --peer list); or restore one node
with only itself as --peer and add the others with 'logplayer cluster add'.`,
		examples: []string{
			"logplayer backup restore --file backup.lpb --data-dir data/n1 \\",
			"    --peer n1=127.0.0.1:7410/127.0.0.1:7400 --peer n2=127.0.0.1:7411/127.0.0.1:7401 --peer n3=127.0.0.1:7412/127.0.0.1:7402",
		},
		required: []string{"file", "data-dir", "peer"},
		new:      func() runner { return &backupCmd{op: "restore"} },
	})
}

type backupCmd struct {
	op      string
	conn    clientFlags
	file    string
	dataDir string
	peers   peerList
}

func (c *backupCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.file, "file", "", "the backup `file`")
	switch c.op {
	case "save":
		c.conn.register(fs)
	case "restore":
		fs.StringVar(&c.dataDir, "data-dir", "", "the new node's data `directory` (missing or empty)")
		fs.Var(&c.peers, "peer", "a voter of the new cluster `ID=RAFT_ADDR/API_ADDR` (repeat for each)")
	}
}

func (c *backupCmd) run(ctx context.Context, s *sys) error {
	if c.op == "restore" {
		info, err := logstore.RestoreBackup(c.file, c.dataDir, logstorePeers(c.peers))
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "restored %s into %s: lsn %d..%d, raft index %d\n", c.file, c.dataDir, info.FirstLSN, info.LastLSN, info.RaftIndex)
		return nil
	}
	info, err := c.save(ctx, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "backup %s: lsn %d..%d, raft index %d, %d archive bytes\n", c.file, info.FirstLSN, info.LastLSN, info.RaftIndex, info.ArchiveBytes)
	return nil
}

// save streams a backup from the cluster into --file (logstore.SaveBackup).
func (c *backupCmd) save(ctx context.Context, s *sys) (logstore.BackupInfo, error) {
	cl, err := c.conn.dial(s)
	if err != nil {
		return logstore.BackupInfo{}, err
	}
	defer cl.Close()
	return logstore.SaveBackup(c.file, func(open func(*logstorepb.BackupInfo) (io.Writer, error)) error {
		ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
		defer cancel()
		if err := cl.Backup(ctx, open); err != nil {
			return c.conn.describe(ctx, "backup", err)
		}
		return nil
	})
}
