// Package jsoncrc writes and reads JSON files that carry a CRC-32C
// (Castagnoli) of their own content: the snapshot store's meta.json and a
// checkpoint's manifest.json.
//
// The checksum is a field of the object ("crc32c"), the CRC-32C of the
// object's encoding by encoding/json with that field absent. Reading
// decodes strictly (an unknown field, a second value or trailing bytes are
// errors), encodes the value again without the field and compares: so any
// change that alters what the file means fails the check, and a change
// that does not (a key's letter case, which encoding/json ignores) is
// harmless. The encoding of a Go value by encoding/json is deterministic
// (struct fields in declaration order), which is what makes re-encoding
// the canonical form.
package jsoncrc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ErrMismatch marks a file whose checksum does not match its content.
var ErrMismatch = errors.New("checksum mismatch")

// ErrMissing marks a file without a checksum field.
var ErrMissing = errors.New("no checksum")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Marshal returns the JSON of v with *crc (a field of v, tagged
// `json:"crc32c,omitempty"`) set to the checksum of v's JSON without it.
func Marshal(v any, crc **uint32) ([]byte, error) {
	*crc = nil
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := crc32.Checksum(b, castagnoli)
	*crc = &sum
	return json.Marshal(v)
}

// Unmarshal decodes b strictly into v and checks *crc (a field of v, as for
// Marshal). Without a checksum field it returns ErrMissing with v decoded:
// the caller decides whether a file of its format may lack one. A
// mismatch wraps ErrMismatch. *crc is nil on return.
func Unmarshal(b []byte, v any, crc **uint32) error {
	*crc = nil
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("bytes after the JSON object (at offset %d)", d.InputOffset())
	}
	want := *crc
	if want == nil {
		return ErrMissing
	}
	*crc = nil
	again, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if got := crc32.Checksum(again, castagnoli); got != *want {
		return fmt.Errorf("%w: content has crc32c 0x%08x, the file says 0x%08x", ErrMismatch, got, *want)
	}
	return nil
}
