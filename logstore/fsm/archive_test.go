package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestArchiveHeaderRoundTrip: the header carries the state and the
// manifest bytes, leaves the reader at the files, and refuses a bad frame
// (ErrCorruptArchive) or undecodable state (ErrCorruptState).
func TestArchiveHeaderRoundTrip(t *testing.T) {
	sm, _ := newTestSM()
	sm.Apply(1, &logstorepb.Entry{TimestampUnixNano: 5, Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 2), ProducerId: "p", Sequence: 1}),
	}})
	state, err := MarshalState(sm.State().ToProto())
	if err != nil {
		t.Fatal(err)
	}
	manifest := []byte(`{"last_lsn":1}`)
	hdr := ArchiveHeader(state, manifest)
	if int64(len(hdr)) != ArchiveHeaderSize(state, manifest) {
		t.Fatalf("header %d bytes, size says %d", len(hdr), ArchiveHeaderSize(state, manifest))
	}
	r := bytes.NewReader(append(hdr, "files"...))
	st, man, err := ReadArchiveHeader(r)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := MarshalState(st.ToProto())
	if !bytes.Equal(again, state) || !bytes.Equal(man, manifest) {
		t.Fatalf("round trip changed the state or manifest: %q", man)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "files" {
		t.Fatalf("reader left at %q, want the files", rest)
	}
	for name, b := range map[string][]byte{
		"bad magic": append([]byte("LPSNAP02"), hdr[8:]...),
		"truncated": hdr[:len(hdr)-1],
		"huge part": append([]byte(archiveMagic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	} {
		if _, _, err := ReadArchiveHeader(bytes.NewReader(b)); !errors.Is(err, ErrCorruptArchive) {
			t.Errorf("%s: %v, want ErrCorruptArchive", name, err)
		}
	}
	if _, _, err := ReadArchiveHeader(bytes.NewReader(ArchiveHeader([]byte{0xff, 0xff}, manifest))); !errors.Is(err, ErrCorruptState) {
		t.Errorf("garbage state: %v, want ErrCorruptState", err)
	}
}
