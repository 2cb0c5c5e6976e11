package shard_test

import (
	"testing"

	"go.etcd.io/bbolt"

	"github.com/logplayer/logplayer/shard/mutation"
)

// TestMutationKeyLimitIsBolts: the pure decoder's key limit is the store's.
func TestMutationKeyLimitIsBolts(t *testing.T) {
	if mutation.MaxKeySize != bbolt.MaxKeySize {
		t.Fatalf("mutation.MaxKeySize %d, bbolt.MaxKeySize %d", mutation.MaxKeySize, bbolt.MaxKeySize)
	}
}
