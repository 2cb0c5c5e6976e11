package main

import (
	"testing"

	"github.com/logplayer/logplayer/logstore/schema"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

// TestEverySchemaHasAValidator: this binary registers a validator for every
// schema the TopicSchema enum defines, so no replica running it can meet a
// committed declaration it cannot check (docs/ARCHITECTURE.md, "Topic
// schemas").
func TestEverySchemaHasAValidator(t *testing.T) {
	for n := range logstorepb.TopicSchema_name {
		if _, err := schema.Lookup(logstorepb.TopicSchema(n)); err != nil {
			t.Errorf("%v", err)
		}
	}
}
