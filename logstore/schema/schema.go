// Package schema is the registry of topic schemas: what every message of a
// declared topic must be. A schema is a value of the TopicSchema enum
// (proto/logstore.proto) and a Validator registered under its name: the
// enum value's name without its TOPIC_SCHEMA_ prefix, in lower case
// (TOPIC_SCHEMA_KV is "kv"). The LogStore's deterministic core
// (logstore/fsm) checks messages through this package and knows no payload
// format itself.
//
// "bytes" (anything) is registered here. Every other schema is registered
// by the binary that runs a LogStore node, before it starts one: "kv" by
// mutation.RegisterSchema (package shard/mutation, the reference shard's
// format), which cmd/logplayer and devcluster call.
//
// Determinism: every replica must hold a validator for every schema a
// committed declaration names, and the same one. The rules
// (docs/ARCHITECTURE.md, "Topic schemas"):
//   - CreateTopic with a schema this binary has no validator for is refused
//     at the edge (fsm.ValidateDeclaration, INVALID_ARGUMENT), naming the
//     schema, and never proposed;
//   - a replica applying a committed declaration, restoring a snapshot or
//     checking an Append for a schema the enum defines but this binary did
//     not register panics (Require): it can no longer decide what every
//     other replica decides, and stopping beats diverging;
//   - a number the enum does not define is refused the same way on every
//     replica built from the same proto (it passed no edge; only a buggy
//     leader sends it). A new schema therefore needs a new enum value, a
//     registration in every store binary, and a cluster version gate, so
//     an older replica never sees it.
//
// Registration happens at process start; lookups afterwards are
// read-only. Goroutines: none.
package schema

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Validator checks one message value against a schema. It must be pure:
// the same bytes give the same answer in every process and every build
// that registers it (no clock, no configuration, no randomness), because
// every replica runs it in apply. The error says what is wrong; the caller
// names the topic and the message.
type Validator interface {
	Validate(value []byte) error
}

// Func adapts a function to Validator.
type Func func(value []byte) error

// Validate calls f.
func (f Func) Validate(value []byte) error { return f(value) }

// ErrUnknown is wrapped by Lookup's error for a number the TopicSchema enum
// does not define.
var ErrUnknown = errors.New("unknown topic schema")

// ErrNotRegistered is wrapped by Lookup's error for a schema the enum
// defines but that has no validator in this binary.
var ErrNotRegistered = errors.New("topic schema has no validator in this binary")

const enumPrefix = "TOPIC_SCHEMA_"

var reg struct {
	mu sync.RWMutex
	v  map[logstorepb.TopicSchema]Validator
}

// anything is the bytes schema: every value passes.
var anything = Func(func([]byte) error { return nil })

func init() {
	Register("bytes", anything)
}

// Register makes v the validator of the schema called name. It panics (a
// wiring bug, found at start) if the TopicSchema enum has no such schema,
// or if name already has a validator: each schema has exactly one.
func Register(name string, v Validator) {
	s, ok := logstorepb.TopicSchema_value[enumPrefix+strings.ToUpper(name)]
	if !ok || s == int32(logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED) || name != strings.ToLower(name) || v == nil {
		panic(fmt.Sprintf("schema.Register(%q): no such schema in the TopicSchema enum (proto/logstore.proto), or a nil validator", name))
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.v == nil {
		reg.v = map[logstorepb.TopicSchema]Validator{}
	}
	if reg.v[logstorepb.TopicSchema(s)] != nil {
		panic(fmt.Sprintf("schema.Register(%q): registered twice", name))
	}
	reg.v[logstorepb.TopicSchema(s)] = v
}

// Name is the schema's word on the command line and in messages: "bytes",
// "kv". UNSPECIFIED reads as "bytes" (what an undeclared topic is); a
// number the enum does not define reads as its number.
func Name(s logstorepb.TopicSchema) string {
	if s == logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED {
		s = logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES
	}
	if !Defined(s) {
		return fmt.Sprintf("schema(%d)", int32(s))
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), enumPrefix))
}

// Defined reports whether the TopicSchema enum of this build defines s
// (UNSPECIFIED included).
func Defined(s logstorepb.TopicSchema) bool {
	_, ok := logstorepb.TopicSchema_name[int32(s)]
	return ok
}

// Lookup returns s's validator (UNSPECIFIED is bytes). The error wraps
// ErrUnknown or ErrNotRegistered and names the schemas this binary has.
func Lookup(s logstorepb.TopicSchema) (Validator, error) {
	if s == logstorepb.TopicSchema_TOPIC_SCHEMA_UNSPECIFIED {
		s = logstorepb.TopicSchema_TOPIC_SCHEMA_BYTES
	}
	if !Defined(s) {
		return nil, fmt.Errorf("%w %d (want one of %s)", ErrUnknown, int32(s), strings.Join(Names(), ", "))
	}
	reg.mu.RLock()
	v := reg.v[s]
	reg.mu.RUnlock()
	if v == nil {
		return nil, fmt.Errorf("%w: %s (this binary has %s)", ErrNotRegistered, Name(s), strings.Join(Names(), ", "))
	}
	return v, nil
}

// Require returns s's validator, panicking if the enum defines s but this
// binary registered none: for apply, which must decide what every other
// replica decides and cannot without it. A number the enum does not define
// returns nil, false: apply refuses it like every replica built from the
// same proto.
func Require(s logstorepb.TopicSchema) (Validator, bool) {
	v, err := Lookup(s)
	switch {
	case err == nil:
		return v, true
	case errors.Is(err, ErrNotRegistered):
		panic(fmt.Sprintf("logstore apply: %v; a committed entry or snapshot names it, so this replica cannot apply the log as the others do: register it in the binary (schema.Register) before starting the node", err))
	}
	return nil, false
}

// Names lists the registered schemas' names, sorted.
func Names() []string {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	out := make([]string, 0, len(reg.v))
	for s := range reg.v {
		out = append(out, Name(s))
	}
	sort.Strings(out)
	return out
}
