package tier

import (
	"testing"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

// BenchmarkRead reads the same sealed segments (about 3 MiB) from the
// local log, from the tier with every segment downloaded (cold: cache too
// small to keep them) and from the tier's cache (warm), against gofakes3
// in process over loopback HTTP:
//
//	go test -run '^$' -bench Read -benchtime 5x ./logstore/tier
func BenchmarkRead(b *testing.B) {
	for _, src := range []string{"local", "tier-cold", "tier-warm"} {
		b.Run("source="+src, func(b *testing.B) {
			benchRead(b, src)
		})
	}
}

func benchRead(b *testing.B, src string) {
	f := newFakeS3(b)
	l, _ := openLog(b, 3000)
	tr := newTier(b, f)
	if src == "tier-warm" {
		tr.mu.cache.maxBytes = 1 << 30
	}
	run(b, tr, l)
	last := lastSealed(l)
	waitFor(b, "upload", func() bool { return tr.Uploaded(1, last) })
	var bytes int64
	for _, s := range l.Segments() {
		if s.Sealed {
			bytes += s.Bytes
		}
	}
	read := func() {
		n := types.LSN(0)
		fn := func(txn *logstorepb.Transaction) (bool, error) { n++; return true, nil }
		var err error
		if src == "local" {
			err = l.Read(1, last, fn)
		} else {
			err = tr.Read(1, last, fn)
		}
		if err != nil || n != last {
			b.Fatalf("read %d of %d: %v", n, last, err)
		}
	}
	if src == "tier-warm" {
		read()
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		read()
	}
}
