package logstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestRaftLogStoreMismatchRefused: a data directory created with one Raft
// log backend refuses to start with the other, with an error that names
// the flag to use, and the directory is left as it was (the node never
// starts empty over existing Raft state).
func TestRaftLogStoreMismatchRefused(t *testing.T) {
	for _, tc := range []struct {
		created, started logstore.RaftLogStore
		wantFlag         string
	}{
		{logstore.RaftLogBoltDB, logstore.RaftLogWAL, "--raft-log-store boltdb"},
		{logstore.RaftLogWAL, logstore.RaftLogBoltDB, "--raft-log-store wal"},
	} {
		t.Run(string(tc.created)+"-then-"+string(tc.started), func(t *testing.T) {
			c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.RaftLogStore = tc.created })
			cl := newClient(t, c.addrs()...)
			appendLoad(t, cl, 1, 5, "m")
			c.stop(0)
			before := dirNames(t, c.Configs[0].Dir)

			cfg := c.Configs[0]
			cfg.RaftLogStore = tc.started
			cfg.RaftListener = logstoretest.Listen(t)
			n, err := logstore.NewNode(cfg)
			if err == nil {
				n.Close()
				t.Fatal("node started over the other backend's Raft state")
			}
			if !errors.Is(err, logstore.ErrRaftLogStoreMismatch) || !strings.Contains(err.Error(), tc.wantFlag) {
				t.Fatalf("err = %v; want ErrRaftLogStoreMismatch naming %q", err, tc.wantFlag)
			}
			if after := dirNames(t, cfg.Dir); !slices.Equal(before, after) {
				t.Fatalf("data directory changed: %v -> %v", before, after)
			}

			// The right backend still starts and has the data.
			c.restart(0)
			c.waitLeader()
		})
	}
}

// TestRaftLogStoreFiles: each backend keeps its Raft state where the docs
// say (raft-wal: raft-wal/ with its wal-meta.db; boltdb: raft.db), and an
// unknown backend name is a config error.
func TestRaftLogStoreFiles(t *testing.T) {
	for backend, want := range map[logstore.RaftLogStore]string{
		logstore.RaftLogWAL:    filepath.Join("raft-wal", "wal-meta.db"),
		logstore.RaftLogBoltDB: "raft.db",
		"":                     filepath.Join("raft-wal", "wal-meta.db"), // the default
	} {
		c := startCluster(t, 1, func(cfg *logstore.Config) { cfg.RaftLogStore = backend })
		if _, err := os.Stat(filepath.Join(c.Configs[0].Dir, want)); err != nil {
			t.Errorf("backend %q: %v", backend, err)
		}
	}
	cfg := logstoretest.Config("x", t.TempDir())
	cfg.RaftLogStore = "rocksdb"
	cfg.RaftListener, cfg.APIAddr = logstoretest.Listen(t), "127.0.0.1:1"
	if _, err := logstore.NewNode(cfg); !errors.Is(err, logstore.ErrConfig) {
		t.Fatalf("unknown backend: err = %v, want ErrConfig", err)
	}
}
