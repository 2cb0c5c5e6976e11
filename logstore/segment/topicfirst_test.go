package segment

import (
	"testing"

	"github.com/logplayer/logplayer/types"
)

// TestTopicFirstOffset checks TopicFirstOffset and TopicFirstOffsets
// against the naive answer (the first offset of each topic among the
// retained records) after retention and after a restart.
func TestTopicFirstOffset(t *testing.T) {
	o := testOptions(t.TempDir())
	l := mustOpen(t, o)
	txns := appendN(t, l, randomTopicsGen(2), 1500)
	check := func(l *Log) {
		t.Helper()
		want := map[string]types.Offset{}
		for _, txn := range txns[l.FirstLSN()-1:] {
			for _, sl := range txn.Slices {
				if _, ok := want[sl.Topic]; !ok && len(sl.Messages) > 0 {
					want[sl.Topic] = types.Offset(sl.FirstOffset)
				}
			}
		}
		all := l.TopicFirstOffsets()
		if len(all) != len(want) {
			t.Fatalf("TopicFirstOffsets has %d topics, want %d (%v vs %v)", len(all), len(want), all, want)
		}
		for topic, off := range want {
			if got, ok := l.TopicFirstOffset(topic); !ok || got != off || all[topic] != off {
				t.Fatalf("first offset of %q: %d %v (all: %d), want %d", topic, got, ok, all[topic], off)
			}
		}
		if _, ok := l.TopicFirstOffset("nope"); ok {
			t.Fatal("a topic never written has a first offset")
		}
	}
	check(l)
	segs := l.Segments()
	if len(segs) < 10 {
		t.Fatalf("only %d segments", len(segs))
	}
	// Keep only the last two segments.
	if _, err := l.DeleteBefore(segs[len(segs)-2].FirstLSN); err != nil {
		t.Fatal(err)
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check(mustOpen(t, o))
}
