package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
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
		var voters []logstore.Peer
		for _, p := range c.peers.peers {
			voters = append(voters, logstore.Peer{ID: p.id, RaftAddr: p.raftAddr, APIAddr: p.apiAddr})
		}
		info, err := logstore.RestoreBackup(c.file, c.dataDir, voters)
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

func (c *backupCmd) save(ctx context.Context, s *sys) (logstore.BackupInfo, error) {
	var info logstore.BackupInfo
	cl, err := c.conn.dial(s)
	if err != nil {
		return info, err
	}
	defer cl.Close()
	tmp, err := os.CreateTemp(filepath.Dir(c.file), filepath.Base(c.file)+".*.tmp")
	if err != nil {
		return info, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var bw *logstore.BackupWriter
	ctx, cancel := context.WithTimeout(ctx, c.conn.timeout)
	defer cancel()
	err = cl.Backup(ctx, func(bi *logstorepb.BackupInfo) (io.Writer, error) {
		if err := tmp.Truncate(0); err != nil {
			return nil, err
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		info = logstore.BackupInfo{RaftIndex: bi.RaftIndex, RaftTerm: bi.RaftTerm,
			FirstLSN: types.LSN(bi.FirstLsn), LastLSN: types.LSN(bi.LastLsn), ArchiveBytes: int64(bi.ArchiveBytes)}
		bw, err = logstore.NewBackupWriter(tmp, info)
		return bw, err
	})
	if err != nil {
		return info, c.conn.describe(ctx, "backup", err)
	}
	if bw == nil {
		return info, errors.New("backup: empty stream")
	}
	if err := bw.Close(); err != nil {
		return info, err
	}
	if err := tmp.Sync(); err != nil {
		return info, err
	}
	if err := tmp.Close(); err != nil {
		return info, err
	}
	if _, err := logstore.VerifyBackup(tmp.Name()); err != nil {
		return info, err
	}
	if err := os.Rename(tmp.Name(), c.file); err != nil {
		return info, err
	}
	d, err := os.Open(filepath.Dir(c.file))
	if err != nil {
		return info, err
	}
	defer d.Close()
	return info, d.Sync()
}
