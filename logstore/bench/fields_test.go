package bench

import (
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestFields: fields hands each length-delimited and varint field to its
// callback (a nil one skips them), skips other wire types, and refuses a
// truncated field of each kind without calling a callback for it.
func TestFields(t *testing.T) {
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType)
	msg = protowire.AppendBytes(msg, []byte("ab"))
	msg = protowire.AppendTag(msg, 2, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 300)
	msg = protowire.AppendTag(msg, 3, protowire.Fixed64Type)
	msg = protowire.AppendFixed64(msg, 7)
	msg = protowire.AppendTag(msg, 4, protowire.BytesType)
	msg = protowire.AppendBytes(msg, nil)

	var got []string
	bytesFn := func(num protowire.Number, v []byte) { got = append(got, fmt.Sprintf("%d:%q", num, v)) }
	varintFn := func(num protowire.Number, x uint64) { got = append(got, fmt.Sprintf("%d:%d", num, x)) }
	if err := fields(msg, bytesFn, varintFn); err != nil {
		t.Fatal(err)
	}
	if want := []string{`1:"ab"`, "2:300", `4:""`}; !slices.Equal(got, want) {
		t.Fatalf("fields saw %q, want %q", got, want)
	}
	got = nil
	if err := fields(msg, nil, varintFn); err != nil || !slices.Equal(got, []string{"2:300"}) {
		t.Fatalf("fields without bytesFn: %q %v, want [2:300]", got, err)
	}

	for _, c := range []struct {
		msg  []byte
		want []string // the callbacks before the refusal
	}{
		{protowire.AppendTag(nil, 1, protowire.BytesType), nil},                    // no length
		{append(protowire.AppendTag(nil, 1, protowire.BytesType), 5, 'a'), nil},    // short value
		{append(protowire.AppendTag(nil, 2, protowire.VarintType), 0x80), nil},     // unfinished varint
		{append(protowire.AppendTag(nil, 3, protowire.Fixed64Type), 1, 2, 3), nil}, // short fixed64
		{append(msg[:len(msg):len(msg)], protowire.AppendTag(nil, 2, protowire.VarintType)...), []string{`1:"ab"`, "2:300", `4:""`}},
	} {
		got = nil
		if err := fields(c.msg, bytesFn, varintFn); err == nil {
			t.Fatalf("fields(% x): nil error", c.msg)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("fields(% x) called back %q, want %q", c.msg, got, c.want)
		}
	}
}
