package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/minio-go/v7"
	"google.golang.org/protobuf/proto"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeS3 is gofakes3 in process behind a switch that makes it answer 503
// (the object store down).
type fakeS3 struct {
	srv  *httptest.Server
	down atomic.Bool
}

func newFakeS3(t testing.TB) *fakeS3 {
	t.Helper()
	f := &fakeS3{}
	h := gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testsecret")
	t.Setenv("AWS_REGION", "us-east-1")
	return f
}

func newTier(t testing.TB, f *fakeS3) *Tier {
	t.Helper()
	tr, err := New(Config{URL: "s3://logs/cluster-a", Endpoint: f.srv.URL, CacheDir: t.TempDir(), CacheBytes: 64 << 10,
		ScanInterval: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, Node: "n1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// run starts the uploader until the test ends.
func run(t testing.TB, tr *Tier, src Source) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })
}

// openLog opens a segment log with small segments and appends n
// transactions (two topics).
func openLog(t testing.TB, n int) (*segment.Log, []*logstorepb.Transaction) {
	t.Helper()
	l, err := segment.Open(segment.Options{Dir: t.TempDir(), SegmentBytes: 8 << 10, IndexIntervalBytes: 1 << 10,
		TopicIndexIntervalBytes: 1 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	next := map[string]uint64{}
	var txns []*logstorepb.Transaction
	for lsn := uint64(1); lsn <= uint64(n); lsn++ {
		txn := &logstorepb.Transaction{Lsn: lsn, RaftIndex: lsn, TimestampUnixNano: int64(lsn)}
		for _, topic := range []string{"orders", fmt.Sprintf("t%d", lsn%3)} {
			txn.Slices = append(txn.Slices, &logstorepb.TxnSlice{Topic: topic, FirstOffset: next[topic],
				Messages: []*logstorepb.Message{{Value: bytes.Repeat([]byte{byte(lsn)}, 100)}}})
			next[topic]++
		}
		if err := l.AppendBatch([]*logstorepb.Transaction{txn}); err != nil {
			t.Fatal(err)
		}
		txns = append(txns, txn)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return l, txns
}

// lastSealed is the last LSN of the newest sealed segment.
func lastSealed(l *segment.Log) types.LSN {
	var last types.LSN
	for _, s := range l.Segments() {
		if s.Sealed {
			last = s.LastLSN
		}
	}
	return last
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, what, cond)
}

func readAll(t *testing.T, l *segment.Log, from types.LSN) ([]*logstorepb.Transaction, error) {
	t.Helper()
	var out []*logstorepb.Transaction
	err := l.Read(from, 0, func(txn *logstorepb.Transaction) (bool, error) {
		out = append(out, txn)
		return true, nil
	})
	return out, err
}

func sameTxns(t *testing.T, got, want []*logstorepb.Transaction) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d transactions, want %d", len(got), len(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("transaction %d (lsn %d) differs from the one appended", i, want[i].Lsn)
		}
	}
}

// TestReadsBelowRetentionComeFromTier: every sealed segment is uploaded,
// retention deletes them locally, and Read, Get and TopicOffsetLSN from
// LSN 1 / offset 0 still return exactly what was appended.
func TestReadsBelowRetentionComeFromTier(t *testing.T) {
	f := newFakeS3(t)
	l, txns := openLog(t, 400)
	tr := newTier(t, f)
	run(t, tr, l)
	last := lastSealed(l)
	if last < 100 {
		t.Fatalf("only lsn %d sealed: segments too large for the test", last)
	}
	waitFor(t, "upload of every sealed segment", func() bool { return tr.Uploaded(1, last) })
	l.SetBelow(tr)
	if _, err := l.DeleteBefore(last + 1); err != nil {
		t.Fatal(err)
	}
	if l.FirstLSN() == 1 {
		t.Fatal("retention deleted nothing")
	}
	if got := l.OldestReadable(); got != 1 {
		t.Fatalf("OldestReadable = %d, want 1", got)
	}
	got, err := readAll(t, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameTxns(t, got, txns)
	if txn, err := l.Get(5); err != nil || txn.Lsn != 5 {
		t.Fatalf("Get(5) = %v, %v", txn, err)
	}
	lsn, err := l.TopicOffsetLSN("orders", 7)
	if err != nil || lsn != 8 {
		t.Fatalf("TopicOffsetLSN(orders, 7) = %d, %v; want 8", lsn, err)
	}
	if off, ok := l.TopicFirstOffset("orders"); !ok || off != 0 {
		t.Fatalf("TopicFirstOffset(orders) = %d, %v; want 0", off, ok)
	}
	st := tr.Stats()
	if st.UploadedSegments == 0 || st.UploadedBytes == 0 || st.Reads == 0 || st.LagSegments != 0 || st.FirstLSN != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCorruptObjectIsNotServed: an object changed in the store fails its
// checksum on download; the read returns ErrChecksum and serves nothing of
// that segment.
func TestCorruptObjectIsNotServed(t *testing.T) {
	f := newFakeS3(t)
	l, _ := openLog(t, 200)
	tr := newTier(t, f)
	run(t, tr, l)
	last := lastSealed(l)
	waitFor(t, "upload", func() bool { return tr.Uploaded(1, last) })
	l.SetBelow(tr)
	if _, err := l.DeleteBefore(last + 1); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	m := tr.mu.cat.find(1)
	tr.mu.Unlock()
	// Same size, one byte changed.
	b := getObject(t, tr, m.segKey(tr.loc.prefix))
	b[len(b)/2] ^= 0xff
	putObject(t, tr, m.segKey(tr.loc.prefix), b)

	served := 0
	err := l.Read(1, 0, func(txn *logstorepb.Transaction) (bool, error) { served++; return true, nil })
	var ce *ChecksumError
	if !errors.Is(err, ErrChecksum) || !errors.As(err, &ce) {
		t.Fatalf("Read over a corrupted object: %v, want a ChecksumError", err)
	}
	if served != 0 {
		t.Fatalf("served %d records of a corrupted segment", served)
	}
	if code := apierr.CodeOf(apierr.Status(err)); code != logstorepb.ErrorCode_TIER_CHECKSUM {
		t.Fatalf("the API answers a corrupted object with %v, want TIER_CHECKSUM", code)
	}
	if tr.Stats().ChecksumFailures == 0 {
		t.Fatal("checksum failure not counted")
	}
}

// TestInterruptedUploadIsRedone: a segment object without its manifest (a
// node killed mid-upload) does not count as uploaded; a new uploader does
// it again from the start, and a later read gets the right bytes.
func TestInterruptedUploadIsRedone(t *testing.T) {
	f := newFakeS3(t)
	l, txns := openLog(t, 200)
	tr := newTier(t, f)
	ctx := context.Background()
	if err := tr.ensureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	first := l.Segments()[0]
	m := &Manifest{FirstLSN: first.FirstLSN, LastLSN: first.LastLSN}
	putObject(t, tr, m.segKey(tr.loc.prefix), []byte("half a segment"))
	if err := tr.loadCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	if tr.Uploaded(first.FirstLSN, first.LastLSN) {
		t.Fatal("a segment without a manifest counts as uploaded")
	}
	run(t, tr, l)
	last := lastSealed(l)
	waitFor(t, "upload", func() bool { return tr.Uploaded(1, last) })
	// A second node (a restart) adopts the manifests instead of uploading.
	tr2 := newTier(t, f)
	run(t, tr2, l)
	waitFor(t, "adoption", func() bool { return tr2.Uploaded(1, last) })
	if n := tr2.Stats().UploadedSegments; n != 0 {
		t.Fatalf("restarted uploader uploaded %d segments again", n)
	}
	l.SetBelow(tr2)
	if _, err := l.DeleteBefore(last + 1); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameTxns(t, got, txns)
}

// TestStoreDownUploadsWait: while the object store answers 503 nothing
// counts as uploaded, errors and lag show it; once it is back the uploads
// finish.
func TestStoreDownUploadsWait(t *testing.T) {
	f := newFakeS3(t)
	l, _ := openLog(t, 200)
	tr := newTier(t, f)
	f.down.Store(true)
	run(t, tr, l)
	last := lastSealed(l)
	waitFor(t, "failed attempts", func() bool { return tr.Stats().UploadErrors >= 3 })
	if tr.Uploaded(1, last) {
		t.Fatal("uploaded while the store is down")
	}
	if st := tr.Stats(); st.Loaded {
		t.Fatalf("catalog loaded while the store is down: %+v", st)
	}
	f.down.Store(false)
	waitFor(t, "upload after the store is back", func() bool { return tr.Uploaded(1, last) })
	// Down again after the catalog is loaded: new seals wait, lag shows.
	f.down.Store(true)
	before := tr.Stats().UploadErrors
	for lsn := l.LastLSN() + 1; lastSealed(l) == last; lsn++ {
		txn := &logstorepb.Transaction{Lsn: uint64(lsn), RaftIndex: uint64(lsn),
			Slices: []*logstorepb.TxnSlice{{Topic: "x", FirstOffset: uint64(lsn - 201), Messages: []*logstorepb.Message{{Value: make([]byte, 500)}}}}}
		if err := l.AppendBatch([]*logstorepb.Transaction{txn}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "lag and errors", func() bool {
		st := tr.Stats()
		return st.LagSegments >= 1 && st.LagBytes > 0 && st.UploadErrors > before
	})
	f.down.Store(false)
	waitFor(t, "upload", func() bool { return tr.Uploaded(1, lastSealed(l)) && tr.Stats().LagSegments == 0 })
}

func getObject(t *testing.T, tr *Tier, key string) []byte {
	t.Helper()
	obj, err := tr.client.GetObject(context.Background(), tr.loc.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func putObject(t *testing.T, tr *Tier, key string, b []byte) {
	t.Helper()
	if _, err := tr.client.PutObject(context.Background(), tr.loc.bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestConfigRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "http://b/p", "s3:///p", "s3://b/p?x=1"} {
		if _, err := New(Config{URL: u, CacheDir: t.TempDir()}); !errors.Is(err, ErrConfig) {
			t.Errorf("URL %q: %v, want ErrConfig", u, err)
		}
	}
	if _, err := New(Config{URL: "s3://b/p", Endpoint: "ftp://x", CacheDir: t.TempDir()}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "endpoint") {
		t.Errorf("bad endpoint: %v", err)
	}
}

func TestCatalogOldestAndCovers(t *testing.T) {
	var c catalog
	for _, r := range [][2]types.LSN{{1, 10}, {11, 20}, {15, 30}, {40, 50}} {
		c.add(&Manifest{FirstLSN: r[0], LastLSN: r[1]})
	}
	for _, tc := range []struct {
		upTo, want types.LSN
	}{{30, 1}, {20, 1}, {35, 36}, {45, 40}, {50, 40}, {5, 1}} {
		if got := c.oldest(tc.upTo); got != tc.want {
			t.Errorf("oldest(%d) = %d, want %d", tc.upTo, got, tc.want)
		}
	}
	if !c.covers(1, 30) || c.covers(1, 31) || !c.covers(40, 50) || c.covers(39, 40) {
		t.Error("covers wrong")
	}
}

func TestCacheEvictsLeastRecentlyUsedUnreferenced(t *testing.T) {
	c := newCache(100)
	add := func(name string) []string {
		var out []string
		for _, e := range c.add(&cacheEntry{name: name, bytes: 60}) {
			out = append(out, e.name)
		}
		return out
	}
	if ev := add("a"); len(ev) != 0 {
		t.Fatalf("evicted %v", ev)
	}
	c.acquire("a") // a is being read
	if ev := add("b"); len(ev) != 0 {
		t.Fatalf("evicted %v while a is read and b is new", ev)
	}
	if ev := c.release("a"); len(ev) != 1 || ev[0].name != "a" {
		t.Fatalf("release of a evicted %v, want a (least recently used)", ev)
	}
	if ev := add("c"); len(ev) != 1 || ev[0] != "b" {
		t.Fatalf("adding c evicted %v, want b", ev)
	}
}

// TestRelistLearnsOtherUploads: a node sharing the prefix learns of the
// segments another node uploaded after it started, at its next listing.
func TestRelistLearnsOtherUploads(t *testing.T) {
	f := newFakeS3(t)
	l, _ := openLog(t, 200)
	other := newTier(t, f)
	other.cfg.RelistInterval = 50 * time.Millisecond
	empty, _ := openLog(t, 0)
	run(t, other, empty) // lists (nothing), then uploads nothing of its own
	waitFor(t, "the first listing", func() bool { return other.Stats().Loaded })
	tr := newTier(t, f)
	run(t, tr, l)
	last := lastSealed(l)
	waitFor(t, "upload", func() bool { return tr.Uploaded(1, last) })
	waitFor(t, "the other node's relisting", func() bool { return other.Uploaded(1, last) })
}
