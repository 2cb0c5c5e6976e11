package security

import (
	"reflect"
	"testing"
)

func TestParseNodeSpec(t *testing.T) {
	for s, want := range map[string]NodeSpec{
		"n1":                 {Name: "n1"},
		"n1=":                {Name: "n1"},
		"n1=db1.example,::1": {Name: "n1", Hosts: []string{"db1.example", "::1"}},
	} {
		if got := ParseNodeSpec(s); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseNodeSpec(%q) = %+v, want %+v", s, got, want)
		}
	}
}
