package types

import (
	"strings"
	"testing"
)

func TestValidTopic(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"shard-7", true},
		{"a.b_C-9", true},
		{strings.Repeat("x", MaxTopicLen), true},
		{"", false},
		{strings.Repeat("x", MaxTopicLen+1), false},
		{"with space", false},
		{"slash/topic", false},
		{"ünïcode", false},
	} {
		if got := ValidTopic(tc.name); got != tc.ok {
			t.Errorf("ValidTopic(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
