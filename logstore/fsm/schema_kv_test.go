package fsm

import "github.com/logplayer/logplayer/shard/mutation"

// The tests declare kv topics: register the kv validator as every store
// binary does (a test import only; TestNoPayloadFormat checks the package).
func init() { mutation.RegisterSchema() }
