package shard

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// bbolt runs only on a real file (it mmaps it), so the crashable in-memory
// filesystem of the segment log cannot hold a shard. TestPowerLossPages
// models a power loss from what bbolt's commit protocol allows the disk to
// keep: a commit writes its data pages (to free pages, never over the pages
// of the last committed tree), fdatasyncs, writes one meta page, and
// fdatasyncs again. Between two commits the disk may so hold any subset of
// the new data pages with the old meta page, or all of them with the new
// meta page whole or torn. The test records the file after every commit
// (each Apply returns after bbolt's last fdatasync), builds such crash
// images between two of them from the seed, and checks that each opens at
// one of the two commits, with the data of the model at its applied LSN,
// and that redelivering from that LSN + 1 ends in the state of the whole
// log (nothing applied twice, nothing lost).
//
// What it does not model: writes reordered across an fdatasync (the disk
// honours flushes), and a torn data page of the commit in flight beyond
// "written or not" at page granularity (bbolt never reads those pages from
// the old meta's tree).
func TestPowerLossPages(t *testing.T) {
	const topic = "t"
	rng := rand.New(rand.NewPCG(1, 2))
	batches := genBatches(rng, topic, 80)
	dir := t.TempDir()
	s, err := openStore(dir, []string{topic}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := s.db.Info().PageSize
	type commit struct {
		image []byte
		lsn   types.LSN
	}
	snap := func(lsn types.LSN) commit {
		b, err := os.ReadFile(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		return commit{image: b, lsn: lsn}
	}
	commits := []commit{snap(0)}
	next := target.State{Epoch: 1, Topics: map[string]types.Offset{}}
	for _, b := range batches {
		next = nextState(next, b)
		if err := s.Apply(b, next.Clone()); err != nil {
			t.Fatal(err)
		}
		commits = append(commits, snap(next.AppliedLSN))
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	all := flatten(batches)
	for seed := range uint64(128) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xb01d))
			k := rng.IntN(len(commits) - 1)
			old, new := commits[k], commits[k+1]
			img, shape := crashImage(rng, old.image, new.image, pageSize)
			crashDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(crashDir, FileName), img, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := openStore(crashDir, []string{topic}, time.Second)
			if err != nil {
				t.Fatalf("seed %d (%s between commits at lsn %d and %d): open: %v", seed, shape, old.lsn, new.lsn, err)
			}
			defer s.close()
			st := s.written
			t.Logf("%s between commits at lsn %d and %d: opened at lsn %d", shape, old.lsn, new.lsn, st.AppliedLSN)
			switch {
			case shape == "data pages only" && st.AppliedLSN != old.lsn,
				shape == "whole commit" && st.AppliedLSN != new.lsn,
				st.AppliedLSN != old.lsn && st.AppliedLSN != new.lsn:
				t.Fatalf("seed %d (%s between commits at lsn %d and %d): opened at lsn %d", seed, shape, old.lsn, new.lsn, st.AppliedLSN)
			}
			checkModel(t, s, topic, all, st.AppliedLSN)
			// Redeliver from the durable LSN on, as the LogPlayer does
			// after the HelloAck (without fsyncs: only the result is
			// checked here).
			s.db.NoSync = true
			next := st.Clone()
			for _, b := range batches {
				if types.LSN(b[len(b)-1].Lsn) <= st.AppliedLSN {
					continue
				}
				next = nextState(next, b)
				if err := s.Apply(b, next.Clone()); err != nil {
					t.Fatal(err)
				}
			}
			checkModel(t, s, topic, all, types.LSN(all[len(all)-1].Lsn))
		})
	}
}

// crashImage returns a file a power loss between the commits whose files
// are old and new could leave, and names its shape.
func crashImage(rng *rand.Rand, old, new []byte, pageSize int) ([]byte, string) {
	img := make([]byte, len(new))
	copy(img, old)
	var data, meta []int // pages that differ
	for p := 0; p*pageSize < len(new); p++ {
		a, b := page(old, p, pageSize), page(new, p, pageSize)
		if bytes.Equal(a, b) {
			continue
		}
		if p < 2 {
			meta = append(meta, p)
		} else {
			data = append(data, p)
		}
	}
	put := func(p, n int) { copy(img[p*pageSize:p*pageSize+n], new[p*pageSize:]) }
	switch rng.IntN(3) {
	case 0:
		for _, p := range data {
			if rng.IntN(2) == 0 {
				put(p, pageSize)
			}
		}
		return img, "data pages only"
	case 1:
		for _, p := range append(data, meta...) {
			put(p, pageSize)
		}
		return img, "whole commit"
	default:
		for _, p := range data {
			put(p, pageSize)
		}
		for _, p := range meta {
			put(p, rng.IntN(96)) // inside the meta struct and its checksum
		}
		return img, "torn meta page"
	}
}

func page(b []byte, p, size int) []byte {
	lo, hi := min(p*size, len(b)), min((p+1)*size, len(b))
	return b[lo:hi]
}

// genBatches makes n batches of 1 to 8 deliveries of puts and deletes of 64
// keys, with progress markers and LSN gaps.
func genBatches(rng *rand.Rand, topic string, n int) [][]*targetpb.Delivery {
	gen := targettest.NewLog()
	out := make([][]*targetpb.Delivery, n)
	for i := range out {
		for range 1 + rng.IntN(8) {
			gen.SkipLSNs(uint64(rng.IntN(3)))
			if rng.IntN(20) == 0 {
				out[i] = append(out[i], gen.Progress())
				continue
			}
			lsn := gen.LSN() + 1
			var vals [][]byte
			for j := range 1 + rng.IntN(4) {
				key := fmt.Sprintf("k%02d", rng.IntN(64))
				if rng.IntN(5) == 0 {
					vals = append(vals, EncodeDelete([]byte(key)))
				} else {
					// Values big enough that a commit spans several pages.
					vals = append(vals, EncodePut([]byte(key), fmt.Appendf(bytes.Repeat([]byte("v"), 200), "%d/%d", lsn, j)))
				}
			}
			out[i] = append(out[i], gen.Txn(targettest.Part{Topic: topic, Values: vals}))
		}
	}
	return out
}

func flatten(batches [][]*targetpb.Delivery) []*targetpb.Delivery {
	var out []*targetpb.Delivery
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// nextState is the State after applying batch b on st (what the target SDK
// passes to Apply).
func nextState(st target.State, b []*targetpb.Delivery) target.State {
	st = st.Clone()
	for _, d := range b {
		st.AppliedLSN = types.LSN(d.Lsn)
		for _, sl := range d.Slices {
			st.Topics[sl.Topic] = types.Offset(sl.FirstOffset) + types.Offset(len(sl.Messages))
		}
	}
	return st
}

// checkModel fails unless s holds exactly the model of the deliveries up to
// lsn, data and topic offset.
func checkModel(t *testing.T, s *store, topic string, all []*targetpb.Delivery, lsn types.LSN) {
	t.Helper()
	model := map[string][]byte{}
	var next types.Offset
	for _, d := range all {
		if types.LSN(d.Lsn) > lsn {
			break
		}
		if err := ModelApply(model, []string{topic}, d.Slices); err != nil {
			t.Fatal(err)
		}
		for _, sl := range d.Slices {
			next = types.Offset(sl.FirstOffset) + types.Offset(len(sl.Messages))
		}
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	data, st, err := dump(tx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedLSN != lsn || !maps.EqualFunc(data, model, bytes.Equal) || st.Topics[topic] != next {
		t.Fatalf("at applied lsn %d (want %d, topic offset %d, want %d) the data differs from the model:\n got %q\nwant %q",
			st.AppliedLSN, lsn, st.Topics[topic], next, data, model)
	}
}
