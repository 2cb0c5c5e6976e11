package logstore

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// closedStable fails every write, like raft-wal's stable store after Close.
type closedStable struct{ raft.StableStore }

func (closedStable) Set([]byte, []byte) error       { return errors.New("store closed") }
func (closedStable) SetUint64([]byte, uint64) error { return errors.New("store closed") }

// Before seal writes reach the store; after it they are dropped (nil),
// so a heartbeat racing Node.Close cannot make Raft panic on a closed
// store.
func TestStableGuard(t *testing.T) {
	mem := raft.NewInmemStore()
	g := &stableGuard{StableStore: mem}
	if err := g.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	if v, err := mem.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Fatalf("before seal: term %d, %v; want 3", v, err)
	}
	g.seal()
	if err := g.SetUint64([]byte("CurrentTerm"), 4); err != nil {
		t.Fatalf("after seal: %v, want nil (dropped)", err)
	}
	if err := g.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatalf("after seal: %v, want nil (dropped)", err)
	}
	if v, _ := mem.GetUint64([]byte("CurrentTerm")); v != 3 {
		t.Fatalf("after seal the store holds term %d, want 3 (write dropped)", v)
	}
	// Unsealed, a failing store's error reaches Raft as before.
	bad := &stableGuard{StableStore: closedStable{mem}}
	if err := bad.SetUint64([]byte("CurrentTerm"), 5); err == nil {
		t.Fatal("unsealed write to a failing store: nil error")
	}
}
