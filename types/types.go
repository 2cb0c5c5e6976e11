// Package types names the protocol numbers shared by every LogPlayer package,
// so a signature says which number it means (docs/DESIGN.md, "Glossary").
//
// They are defined types, not aliases: an LSN cannot be passed where an
// Offset, a Term or an Epoch is expected without a visible conversion. Proto
// messages keep plain uint64 fields; code converts at the proto edge, where a
// message is built or read.
package types

import (
	"errors"
	"strconv"
	"strings"
)

// LSN is the log sequence number of a committed transaction: dense 1, 2, 3, …
// assigned at apply. 0 means "nothing yet".
type LSN uint64

// ParseLSNs reads LSNs (each >= 1) separated by commas, such as "4,711".
func ParseLSNs(s string) ([]LSN, error) {
	var lsns []LSN
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil || n == 0 {
			return nil, errors.New("want LSNs (>= 1) separated by commas")
		}
		lsns = append(lsns, LSN(n))
	}
	return lsns, nil
}

// Offset is the dense per-topic position of a message: 0, 1, 2, …
type Offset uint64

// Term is the dispatcher's per-target generation in a LogPlayer, starting at
// 1 and bumped each time the target returns (docs/DESIGN.md, "Glossary": term). It never
// goes on the wire; the Raft term is a different number, always called the
// "raft term", and so is the Hello's Session.
type Term uint64

// Session numbers the Deliver streams one LogPlayer opens to one target
// within one epoch (Hello.session): increasing, never reset in the epoch
// (one counter per LogPlayer serves all its targets, so not dense). A
// target refuses a Hello whose session is below one it has seen in the same
// epoch. It is not the dispatcher's Term: a Hello that fails before its
// handshake uses a session and no term.
type Session uint64

// Epoch is a LogPlayer instance generation, committed in the LogStore;
// targets refuse streams from an older epoch.
type Epoch uint64

// TargetID names a delivery target.
type TargetID string

// MaxTopicLen is the longest topic name (Kafka's limit).
const MaxTopicLen = 249

// ValidTopic reports whether name is a topic name: 1 to MaxTopicLen
// characters of [A-Za-z0-9._-]. The one definition of the rule: the LogStore
// checks it at its gRPC edge, the LogPlayer in its target configuration.
func ValidTopic(name string) bool {
	if name == "" || len(name) > MaxTopicLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
