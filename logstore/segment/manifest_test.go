package segment

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// TestManifestChecksum: Marshal's bytes read back; every single-bit flip
// is refused or reads back as the same manifest (a key's letter case);
// a manifest without a checksum is read only when legacy is allowed.
func TestManifestChecksum(t *testing.T) {
	m := manifestOf(1, 10, 10, 5)
	m.LastRaftIndex = 40
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalManifest(b, false)
	if err != nil || got.LastRaftIndex != 40 || len(got.Files) != len(m.Files) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	want, _ := json.Marshal(m)
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			got, err := UnmarshalManifest(c, true)
			if err == nil {
				if again, _ := json.Marshal(got); !bytes.Equal(again, want) {
					t.Fatalf("flip of bit %d at %d accepted as %s", bit, i, again)
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip of bit %d at %d: untyped error %v", bit, i, err)
			}
		}
	}
	legacy, _ := json.Marshal(m)
	if _, err := UnmarshalManifest(legacy, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("manifest without a checksum, legacy not allowed: %v", err)
	}
	if got, err := UnmarshalManifest(legacy, true); err != nil || got.LastLSN != m.LastLSN {
		t.Fatalf("manifest without a checksum, legacy allowed: %+v, %v", got, err)
	}
	bad := manifestOf(1, 10, 10)
	bad.Files[0].Name = "../escape.seg"
	if b, err = bad.Marshal(); err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalManifest(b, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("malformed manifest with a valid checksum: %v", err)
	}
}

// FuzzUnmarshalManifest: any bytes are refused with ErrCorrupt or give a
// valid manifest that Marshal writes back to the same manifest.
func FuzzUnmarshalManifest(f *testing.F) {
	m := manifestOf(1, 10, 10, 5)
	b, _ := m.Marshal()
	f.Add(b, false)
	legacy, _ := json.Marshal(m)
	f.Add(legacy, true)
	f.Fuzz(func(t *testing.T, b []byte, legacy bool) {
		got, err := UnmarshalManifest(b, legacy)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalManifest(again, false)
		a, _ := json.Marshal(got)
		c, _ := json.Marshal(back)
		if err != nil || !bytes.Equal(a, c) {
			t.Fatalf("%s does not read back: %v", again, err)
		}
	})
}
