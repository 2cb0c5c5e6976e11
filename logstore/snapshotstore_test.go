package logstore

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/logplayer/logplayer/internal/jsoncrc"
	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/segment"
)

func testMeta() snapMeta {
	return snapMeta{Kind: kindLocal, StateCRC: 0xdeadbeef, SnapshotMeta: raft.SnapshotMeta{
		Version: raft.SnapshotVersionMax, ID: "3-120-1700000000000", Index: 120, Term: 3, ConfigurationIndex: 7, Size: 4096,
		Configuration: raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7000"}}},
	}}
}

// TestSnapMetaFormats: meta.json at format 2 reads back and refuses every
// single-bit flip that changes it; one from before checksums (no format,
// no crc32c) is read as legacy; an unknown format or a term/index other
// than the id's is refused.
func TestSnapMetaFormats(t *testing.T) {
	m := testMeta()
	b, err := marshalMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unmarshalMeta(b, m.ID)
	if err != nil || got.legacy() || got.Index != 120 || got.StateCRC != m.StateCRC {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	canon := func(m snapMeta) []byte {
		m.CRC = nil
		b, _ := json.Marshal(m)
		return b
	}
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if got, err := unmarshalMeta(c, m.ID); err == nil && !bytes.Equal(canon(got), canon(testMetaAt(2))) {
				t.Fatalf("flip of bit %d at %d accepted: %s", bit, i, canon(got))
			}
		}
	}
	old, _ := json.Marshal(struct {
		raft.SnapshotMeta
		Kind string `json:"kind"`
	}{m.SnapshotMeta, m.Kind})
	if got, err := unmarshalMeta(old, m.ID); err != nil || !got.legacy() {
		t.Fatalf("meta.json from before checksums: %+v, %v", got, err)
	}
	three := testMetaAt(3)
	offID := testMetaAt(2)
	offID.Index++
	for name, bad := range map[string]snapMeta{"format 3": three, "index not the id's": offID} {
		b, err := jsoncrc.Marshal(&bad, &bad.CRC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unmarshalMeta(b, bad.ID); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func testMetaAt(format int) snapMeta {
	m := testMeta()
	m.Format = format
	return m
}

// FuzzUnmarshalMeta: any bytes are refused or give a meta.json that
// marshalMeta writes back to the same value.
func FuzzUnmarshalMeta(f *testing.F) {
	m := testMeta()
	b, _ := marshalMeta(m)
	f.Add(b)
	old, _ := json.Marshal(struct {
		raft.SnapshotMeta
		Kind string `json:"kind"`
	}{m.SnapshotMeta, m.Kind})
	f.Add(old)
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := unmarshalMeta(b, m.ID)
		if err != nil {
			return
		}
		again, err := marshalMeta(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := unmarshalMeta(again, m.ID)
		if err != nil || back.Index != got.Index || back.Term != got.Term || back.StateCRC != got.StateCRC || back.Kind != got.Kind {
			t.Fatalf("%s does not read back: %v", again, err)
		}
	})
}

// TestReapCutShortLeavesNoSnapshotWithoutMeta takes two snapshots on the
// crashable filesystem (retain 1: the second's Close reaps the first) and
// cuts the power right after, for 64 seeds: in every crash image each
// snapshot directory is either whole (meta.json there) or a *.tmp one
// that the next start removes. Removing the files in place left, for some
// seeds, a directory without meta.json that List skips for ever.
func TestReapCutShortLeavesNoSnapshotWithoutMeta(t *testing.T) {
	const dir = "/node/snapshots"
	for seed := range int64(64) {
		fsys := vfs.NewCrashableMem()
		clock := int64(0)
		s, err := newSnapshotStore(dir, fsys, 1, slog.New(slog.DiscardHandler), func() time.Time { clock++; return time.UnixMilli(clock) })
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(2) {
			sink, err := s.Create(raft.SnapshotVersionMax, 10+i, 1, raft.Configuration{}, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := sink.(*snapSink)
			if err := fsys.MkdirAll(k.dataPath(), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := writeFileSync(fsys, filepath.Join(k.dataPath(), "00000000000000000001.seg"), make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
			if err := k.finishLocal([]byte("state"), segment.Manifest{}); err != nil {
				t.Fatal(err)
			}
			if err := k.Close(); err != nil {
				t.Fatal(err)
			}
		}
		img := fsys.CrashClone(rand.New(rand.NewPCG(uint64(seed), 1)))
		names, err := img.Subdirs(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if _, err := img.Stat(filepath.Join(dir, name, metaFile)); err != nil && !strings.HasSuffix(name, tmpSuffix) {
				t.Fatalf("seed %d: %s has no meta.json and is not a *.tmp directory (%v)", seed, name, err)
			}
		}
	}
}
