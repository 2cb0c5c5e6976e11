package api

import "github.com/logplayer/logplayer/shard/mutation"

// The tests declare kv topics on LogStores in this process: register the
// kv validator as every store binary does (package logstore/schema).
func init() { mutation.RegisterSchema() }
