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

	"github.com/logplayer/logplayer/internal/boltcrash"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// TestPowerLossPages records the file after every commit (each Apply
// returns after bbolt's last fdatasync), builds for 128 seeds a crash image
// between two consecutive commits with internal/boltcrash (its package doc
// says what a power loss may and may not leave in that model), and checks
// that each opens at one of the two commits, with the data of the model at
// its applied LSN, and that redelivering from that LSN + 1 ends in the
// state of the whole log (nothing applied twice, nothing lost).
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
	var files [][]byte   // the file after each commit
	var lsns []types.LSN // its applied LSN
	snap := func(lsn types.LSN) {
		b, err := os.ReadFile(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		files, lsns = append(files, b), append(lsns, lsn)
	}
	snap(0)
	next := target.State{Epoch: 1, Topics: map[string]types.Offset{}}
	for _, b := range batches {
		next = nextState(next, b)
		if err := s.Apply(b, next.Clone()); err != nil {
			t.Fatal(err)
		}
		snap(next.AppliedLSN)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	all := flatten(batches)
	for seed := range uint64(128) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xb01d))
			k, img, shape := boltcrash.Between(rng, files, pageSize)
			oldLSN, newLSN := lsns[k], lsns[k+1]
			crashDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(crashDir, FileName), img, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := openStore(crashDir, []string{topic}, time.Second)
			if err != nil {
				t.Fatalf("seed %d (%s between commits at lsn %d and %d): open: %v", seed, shape, oldLSN, newLSN, err)
			}
			defer s.close()
			st := s.written
			t.Logf("%s between commits at lsn %d and %d: opened at lsn %d", shape, oldLSN, newLSN, st.AppliedLSN)
			switch {
			case shape == boltcrash.DataPagesOnly && st.AppliedLSN != oldLSN,
				shape == boltcrash.WholeCommit && st.AppliedLSN != newLSN,
				st.AppliedLSN != oldLSN && st.AppliedLSN != newLSN:
				t.Fatalf("seed %d (%s between commits at lsn %d and %d): opened at lsn %d", seed, shape, oldLSN, newLSN, st.AppliedLSN)
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
