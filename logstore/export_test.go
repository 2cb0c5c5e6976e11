package logstore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/logstore/fsm"
	"github.com/logplayer/logplayer/logstore/segment"
)

// FSMStateForTest returns n's FSM state as deterministic bytes and the Raft
// index it has applied through, read together.
func FSMStateForTest(n *Node) (stateBytes []byte, appliedIndex uint64) {
	n.fsm.withState(func(st *fsm.State) {
		var err error
		if stateBytes, err = fsm.MarshalState(st.ToProto()); err != nil {
			panic(err)
		}
		appliedIndex = st.LastIndex()
	})
	return stateBytes, appliedIndex
}

// GroupOffsetRowsForTest returns how many (group, topic) offsets n holds.
func GroupOffsetRowsForTest(n *Node) (rows int) {
	n.fsm.withState(func(st *fsm.State) { rows = st.GroupOffsetRows() })
	return rows
}

// OpenNewestSnapshotForTest opens n's newest snapshot as Raft would to
// stream it to a follower: its id, size and archive reader.
func OpenNewestSnapshotForTest(n *Node) (id string, size int64, rc io.ReadCloser, err error) {
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return "", 0, nil, fmt.Errorf("no snapshot (%v)", err)
	}
	m, rc, err := n.snaps.Open(metas[0].ID)
	if err != nil {
		return "", 0, nil, err
	}
	return m.ID, m.Size, rc, nil
}

// SnapshotIDsForTest lists n's snapshot ids, newest first.
func SnapshotIDsForTest(n *Node) []string {
	metas, err := n.snaps.List()
	if err != nil {
		panic(err)
	}
	var ids []string
	for _, m := range metas {
		ids = append(ids, m.ID)
	}
	return ids
}

// SetRestoreHookForTest makes RestoreBackup call f(path) once it has
// opened the backup file and before it reads it, until t ends.
func SetRestoreHookForTest(t interface{ Cleanup(func()) }, f func(path string)) {
	restoreOpened = f
	t.Cleanup(func() { restoreOpened = nil })
}

// ParseBackupHeaderForTest parses a backup file's header.
func ParseBackupHeaderForTest(h []byte) (BackupInfo, error) { return parseBackupHeader(h) }

// ResealSnapshotMetaForTest changes snapshot dir's meta.json by edit and
// writes it back with a valid checksum.
func ResealSnapshotMetaForTest(dir string, edit func(*raft.SnapshotMeta)) error {
	path := filepath.Join(dir, metaFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := unmarshalMeta(b, filepath.Base(dir))
	if err != nil {
		return err
	}
	edit(&m.SnapshotMeta)
	if b, err = marshalMeta(m); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ResealManifestForTest changes a manifest.json by edit and writes it back
// with a valid checksum.
func ResealManifestForTest(path string, edit func(*segment.Manifest)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := segment.UnmarshalManifest(b, false)
	if err != nil {
		return err
	}
	edit(&m)
	if b, err = m.Marshal(); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ParseSnapshotIDForTest returns the term and index in a snapshot id.
func ParseSnapshotIDForTest(id string) (term, index uint64, ok bool) { return parseSnapshotID(id) }
