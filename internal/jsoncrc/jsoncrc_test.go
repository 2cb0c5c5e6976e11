package jsoncrc

import (
	"errors"
	"testing"
)

type doc struct {
	Name  string  `json:"name"`
	Index uint64  `json:"index"`
	CRC   *uint32 `json:"crc32c,omitempty"`
}

// TestEveryBitFlipOfAValueIsCaught flips each bit of a sealed file: every
// flip is an error except those that leave the decoded value as it was
// (a key's letter case).
func TestEveryBitFlipOfAValueIsCaught(t *testing.T) {
	in := doc{Name: "snap-1", Index: 42}
	b, err := Marshal(&in, &in.CRC)
	if err != nil {
		t.Fatal(err)
	}
	var out doc
	if err := Unmarshal(b, &out, &out.CRC); err != nil || out.Name != in.Name || out.Index != in.Index {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	for i := range b {
		for bit := range 8 {
			c := append([]byte(nil), b...)
			c[i] ^= 1 << bit
			var got doc
			err := Unmarshal(c, &got, &got.CRC)
			if err == nil && (got.Name != in.Name || got.Index != in.Index) {
				t.Fatalf("flip of bit %d at %d (%q) accepted as %+v", bit, i, c, got)
			}
		}
	}
}

func TestMissingAndTrailing(t *testing.T) {
	var d doc
	if err := Unmarshal([]byte(`{"name":"a","index":1}`), &d, &d.CRC); !errors.Is(err, ErrMissing) || d.Index != 1 {
		t.Fatalf("no checksum: %v (%+v)", err, d)
	}
	in := doc{Name: "a"}
	b, _ := Marshal(&in, &in.CRC)
	for _, bad := range [][]byte{append(b, '{', '}'), append(b, 'x'), []byte(`{"name":"a","other":1}`)} {
		if err := Unmarshal(bad, &d, &d.CRC); err == nil || errors.Is(err, ErrMissing) {
			t.Fatalf("%q accepted (%v)", bad, err)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	in := doc{Name: "x", Index: 7}
	b, _ := Marshal(&in, &in.CRC)
	f.Add(b)
	f.Add([]byte(`{"name":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d doc
		if err := Unmarshal(b, &d, &d.CRC); err == nil {
			again, err := Marshal(&d, &d.CRC)
			if err != nil {
				t.Fatal(err)
			}
			var d2 doc
			if err := Unmarshal(again, &d2, &d2.CRC); err != nil || d2.Name != d.Name || d2.Index != d.Index {
				t.Fatalf("re-sealed %q does not read back: %v", again, err)
			}
		}
	})
}
