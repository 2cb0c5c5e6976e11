package shard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// failingReader returns err after n bytes of r.
type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	k, err := f.r.Read(p[:min(len(p), f.n)])
	f.n -= k
	return k, err
}

// TestSnapshotRestore: a snapshot of a shard restored into an empty one
// holds exactly the sibling's data and State; a restore interrupted
// half-way (the stream broke; then a staged file left by a crashed
// process) changes nothing and the rerun succeeds; a second restore is
// refused (ErrNotEmpty), as is a snapshot whose header says another State
// (ErrSnapshotMismatch); and the restored shard continues from its State.
func TestSnapshotRestore(t *testing.T) {
	const topic = "t"
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 29))
	batches := genBatches(rng, topic, 60)
	src, err := openStore(t.TempDir(), []string{topic}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	next := target.State{Epoch: 3, Topics: map[string]types.Offset{}, LogClusterID: "c1", LogIncarnation: "i1"}
	for _, b := range batches[:50] {
		next = nextState(next, b)
		if err := src.Apply(b, next.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	var snapState target.State
	if err := src.Snapshot(ctx, func(st target.State) (io.Writer, error) { snapState = st; return &buf, nil }); err != nil {
		t.Fatal(err)
	}
	if !target.SameData(snapState, next) || snapState.Epoch != 3 {
		t.Fatalf("snapshot State %+v, want %+v", snapState, next)
	}
	t.Logf("snapshot of %d bytes at lsn %d", buf.Len(), snapState.AppliedLSN)

	dstDir := t.TempDir()
	dst, err := openStore(dstDir, []string{topic}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.close()
	// A LogPlayer's Hello stored a higher epoch in the empty shard: the
	// restore keeps it (the SDK passes the max).
	if err := dst.Apply(nil, target.State{Epoch: 5, Topics: map[string]types.Offset{}}); err != nil {
		t.Fatal(err)
	}
	want := snapState.Clone()
	want.Epoch = 5
	staging := filepath.Join(dstDir, StagingFileName)

	// 1. The stream breaks half-way: nothing restored, nothing staged.
	broke := errors.New("stream broke")
	_, err = dst.Restore(ctx, want, &failingReader{r: bytes.NewReader(buf.Bytes()), n: buf.Len() / 2, err: broke})
	if !errors.Is(err, broke) {
		t.Fatalf("interrupted restore: %v, want %v", err, broke)
	}
	checkEmptyStore(t, dst, staging)

	// 2. A process crashed mid-stage and left half a file: the rerun
	// discards it.
	if err := os.WriteFile(staging, buf.Bytes()[:buf.Len()/2], 0o600); err != nil {
		t.Fatal(err)
	}
	bad := want.Clone()
	bad.AppliedLSN++
	if _, err := dst.Restore(ctx, bad, bytes.NewReader(buf.Bytes())); !errors.Is(err, target.ErrSnapshotMismatch) {
		t.Fatalf("restore with a header of another State: %v, want ErrSnapshotMismatch", err)
	}
	checkEmptyStore(t, dst, staging)
	if err := os.WriteFile(staging, buf.Bytes()[:buf.Len()/2], 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := dst.Restore(ctx, want, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if !target.SameData(got, next) || got.Epoch != 5 {
		t.Fatalf("restored State %+v, want %+v with epoch 5", got, next)
	}
	if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging file after the restore: %v", err)
	}
	all := flatten(batches)
	checkModel(t, dst, topic, all, next.AppliedLSN)
	if _, err := dst.Restore(ctx, want, bytes.NewReader(buf.Bytes())); !errors.Is(err, target.ErrNotEmpty) {
		t.Fatalf("second restore: %v, want ErrNotEmpty", err)
	}

	// 3. The tail continues on the restored shard as on the sibling.
	cont := got.Clone()
	for _, b := range batches[50:] {
		cont = nextState(cont, b)
		if err := dst.Apply(b, cont.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	checkModel(t, dst, topic, all, cont.AppliedLSN)
}

// checkEmptyStore fails unless s is still empty (state and data), also as
// a fresh open would read it, and no staging file is left.
func checkEmptyStore(t *testing.T, s *store, staging string) {
	t.Helper()
	if err := s.checkEmpty(); err != nil {
		t.Fatalf("after a failed restore: %v", err)
	}
	if st, err := s.State(); err != nil || st.AppliedLSN != 0 || st.Epoch != 5 {
		t.Fatalf("after a failed restore: State %+v, %v", st, err)
	}
	if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging file after a failed restore: %v", err)
	}
}
