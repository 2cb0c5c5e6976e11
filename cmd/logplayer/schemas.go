package main

import "github.com/logplayer/logplayer/shard/mutation"

// The topic schemas this binary's LogStore nodes check (package
// logstore/schema): bytes is built in, kv is the reference shard's
// Mutation. Every store binary of a cluster must register the same ones
// (docs/ARCHITECTURE.md, "Topic schemas").
func init() { mutation.RegisterSchema() }
