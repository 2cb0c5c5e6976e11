package api

import (
	"strings"
	"testing"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func TestValidateGroupConditions(t *testing.T) {
	ok := []*logstorepb.Slice{{Topic: "a", Messages: []*logstorepb.Message{{}}}}
	for _, tc := range []struct {
		name  string
		conds []*logstorepb.Condition
		code  logstorepb.ErrorCode
	}{
		{"topic and group on one topic", []*logstorepb.Condition{{Topic: "a"}, {Group: "g", Topic: "a"}, {Group: "h", Topic: "a"}}, logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED},
		{"group twice", []*logstorepb.Condition{{Group: "g", Topic: "a"}, {Group: "g", Topic: "a", ExpectedNextOffset: 1}}, logstorepb.ErrorCode_DUPLICATE_TOPIC},
		{"group too long", []*logstorepb.Condition{{Group: strings.Repeat("g", MaxNameLen+1), Topic: "a"}}, logstorepb.ErrorCode_INVALID_ARGUMENT},
		{"group with bad topic", []*logstorepb.Condition{{Group: "g", Topic: "a b"}}, logstorepb.ErrorCode_INVALID_TOPIC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validateAppend(&logstorepb.AppendRequest{Slices: ok, Conditions: tc.conds}, 1<<20, 4<<20)
			if apierr.CodeOf(err) != tc.code || (err == nil) != (tc.code == logstorepb.ErrorCode_ERROR_CODE_UNSPECIFIED) {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
		})
	}
}
