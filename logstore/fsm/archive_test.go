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
		"bad magic": append([]byte("LPSNAP03"), hdr[8:]...),
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

// archiveV1 is a header as releases before the checksum wrote it.
func archiveV1(state, manifest []byte) []byte {
	hdr := ArchiveHeader(state, manifest)
	hdr = hdr[:len(hdr)-archiveCRCSize]
	copy(hdr, archiveMagicV1)
	return hdr
}

// TestArchiveHeaderChecksum: every single-bit flip anywhere in a header is
// refused (none passes as a format 1 header either); a format 1 header is
// still read.
func TestArchiveHeaderChecksum(t *testing.T) {
	sm, _ := newTestSM()
	sm.Apply(1, &logstorepb.Entry{TimestampUnixNano: 5, Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 2), ProducerId: "p", Sequence: 1}),
	}})
	sm.Apply(2, &logstorepb.Entry{Commands: []*logstorepb.Command{{Kind: &logstorepb.Command_ReportConsumer{
		ReportConsumer: &logstorepb.ReportConsumerRequest{Consumer: "logplayer/t1", AckedLsn: 1}}}}})
	state, err := MarshalState(sm.State().ToProto())
	if err != nil {
		t.Fatal(err)
	}
	manifest := []byte(`{"first_lsn":1,"last_lsn":1}`)
	hdr := ArchiveHeader(state, manifest)
	for i := range hdr {
		for bit := range 8 {
			b := bytes.Clone(hdr)
			b[i] ^= 1 << bit
			if _, _, err := ReadArchiveHeader(bytes.NewReader(b)); err == nil {
				t.Fatalf("flip of bit %d at byte %d of %d accepted", bit, i, len(hdr))
			}
		}
	}
	st, man, err := ReadArchiveHeader(bytes.NewReader(archiveV1(state, manifest)))
	if err != nil || st.LastLSN() != 1 || !bytes.Equal(man, manifest) {
		t.Fatalf("format 1 header: %v, %q, %v", st, man, err)
	}
}

// FuzzReadArchiveHeader: any bytes are refused with a typed error or read
// as a header that writes back to the same state and manifest.
func FuzzReadArchiveHeader(f *testing.F) {
	sm, _ := newTestSM()
	sm.Apply(1, &logstorepb.Entry{TimestampUnixNano: 5, Commands: []*logstorepb.Command{
		appendCmd(&logstorepb.AppendRequest{Slices: slices2("a", "b", 2), ProducerId: "p", Sequence: 1}),
	}})
	state, _ := MarshalState(sm.State().ToProto())
	f.Add(ArchiveHeader(state, []byte(`{"last_lsn":1}`)))
	f.Add(archiveV1(state, []byte(`{}`)))
	f.Add([]byte(archiveMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, man, err := ReadArchiveHeader(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorruptArchive) && !errors.Is(err, ErrCorruptState) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		sb, err := MarshalState(st.ToProto())
		if err != nil {
			t.Fatal(err)
		}
		st2, man2, err := ReadArchiveHeader(bytes.NewReader(ArchiveHeader(sb, man)))
		if err != nil || !bytes.Equal(man2, man) || st2.LastLSN() != st.LastLSN() || st2.LastIndex() != st.LastIndex() {
			t.Fatalf("header read from %x does not round trip: %v", b, err)
		}
	})
}
