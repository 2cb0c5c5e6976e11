package bench

import (
	"bytes"
	"compress/gzip"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestLabelledCPU decodes a hand-built profile: two sample types
// (samples/count, cpu/nanoseconds), a sample with the server label (values
// packed), one with another label, one without (values unpacked); only
// the first's cpu value counts.
func TestLabelledCPU(t *testing.T) {
	strs := []string{"", "samples", "count", "cpu", "nanoseconds", "bench", "server", "client"}
	msg := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	bytesField := func(n protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), v)
	}
	varint := func(n protowire.Number, x uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), x)
	}
	packed := func(xs ...uint64) []byte {
		var b []byte
		for _, x := range xs {
			b = protowire.AppendVarint(b, x)
		}
		return bytesField(2, b)
	}
	label := func(k, v uint64) []byte { return bytesField(3, msg(varint(1, k), varint(2, v))) }
	var p []byte
	p = append(p, bytesField(1, msg(varint(1, 1), varint(2, 2)))...) // samples/count
	p = append(p, bytesField(1, msg(varint(1, 3), varint(2, 4)))...) // cpu/nanoseconds
	p = append(p, bytesField(2, msg(packed(3, 30_000_000), label(5, 6)))...)
	p = append(p, bytesField(2, msg(packed(1, 10_000_000), label(5, 7)))...)
	p = append(p, bytesField(2, msg(varint(2, 2), varint(2, 20_000_000)))...)
	for _, s := range strs {
		p = append(p, bytesField(6, []byte(s))...)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(p)
	w.Close()
	got, err := labelledCPU(gz.Bytes(), serverLabelKey, serverLabelValue)
	if err != nil || got != 30*time.Millisecond {
		t.Fatalf("labelled cpu %v, %v; want 30ms", got, err)
	}
}
