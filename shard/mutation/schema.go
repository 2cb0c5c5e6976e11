package mutation

import (
	"sync"

	"github.com/logplayer/logplayer/logstore/schema"
)

// SchemaName is the topic schema whose messages are Mutations: a "kv"
// topic's every message must Decode.
const SchemaName = "kv"

// Validate is the kv schema's validator: value must Decode.
func Validate(value []byte) error {
	_, err := Decode(value)
	return err
}

var registerOnce sync.Once

// RegisterSchema registers Validate as the "kv" topic schema (package
// logstore/schema). Every binary that runs a LogStore node calls it before
// starting one, so every replica checks kv topics with the decoder the
// shard applies them with; calling it again does nothing.
func RegisterSchema() {
	registerOnce.Do(func() { schema.Register(SchemaName, schema.Func(Validate)) })
}
