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

func TestParseLSNs(t *testing.T) {
	got, err := ParseLSNs("4, 711,1")
	if err != nil || len(got) != 3 || got[0] != 4 || got[1] != 711 || got[2] != 1 {
		t.Fatalf("ParseLSNs: %v, %v", got, err)
	}
	for _, s := range []string{"", "0", "1,,2", "x", "-1"} {
		if _, err := ParseLSNs(s); err == nil || err.Error() != "want LSNs (>= 1) separated by commas" {
			t.Errorf("ParseLSNs(%q): %v", s, err)
		}
	}
}
