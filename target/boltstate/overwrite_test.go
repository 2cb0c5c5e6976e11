package boltstate_test

import (
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/target/boltstate"
	"github.com/logplayer/logplayer/types"
)

// Overwrite (the offline reset's writer) may go backwards, drops the
// offsets of topics the new State does not hold and removes an emptied
// log identity; the State loaded afterwards is exactly the one written.
func TestOverwriteReplacesEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, st, err := testLayout.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	high := target.State{AppliedLSN: 90, Epoch: 7, Topics: map[string]types.Offset{"a": 40, "b": 12},
		LogClusterID: "c1", LogIncarnation: "i1"}
	if err := db.Update(func(tx *bbolt.Tx) error { return boltstate.Save(tx, st, high) }); err != nil {
		t.Fatal(err)
	}
	low := target.State{AppliedLSN: 10, Epoch: 3, Topics: map[string]types.Offset{"a": 5}}
	if err := db.Update(func(tx *bbolt.Tx) error { return boltstate.Overwrite(tx, low) }); err != nil {
		t.Fatalf("overwrite backwards: %v", err)
	}
	var got target.State
	if err := db.View(func(tx *bbolt.Tx) error {
		var err error
		got, err = testLayout.Load(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !sameState(got, low) {
		t.Fatalf("after overwrite: %+v, want %+v (topic b and the identity gone)", got, low)
	}
}
