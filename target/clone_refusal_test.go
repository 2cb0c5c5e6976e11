package target_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/logplayer/logplayer/target"
)

// TestCloneRefusal names each refusal of Clone, wrapped or not, and no
// other error.
func TestCloneRefusal(t *testing.T) {
	for err, want := range map[error]string{
		target.ErrSiblingBehind:                              "SIBLING_BEHIND",
		fmt.Errorf("x: %w", target.ErrTopicsDiffer):          "TOPICS_DIFFER",
		target.ErrOtherLogSnapshot:                           "OTHER_LOG",
		target.ErrTargetNotEmpty:                             "NOT_EMPTY",
		target.ErrUnknownSibling:                             "UNKNOWN_SIBLING",
		fmt.Errorf("%w: no sibling", target.ErrCloneInvalid): "INVALID",
		errors.New("unavailable"):                            "",
		nil:                                                  "",
	} {
		if got := target.CloneRefusal(err); got != want {
			t.Errorf("CloneRefusal(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestCloneResultMessage(t *testing.T) {
	res := target.CloneResult{State: target.State{AppliedLSN: 42}, FirstLSN: 7, Bytes: 1000}
	if got, want := res.Message("a", "b"), "cloned a into b at applied lsn 42 (1000 bytes; the log's first retained lsn is 7); b registered: the LogPlayer delivers the tail"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	res.AlreadyRestored = true
	if got, want := res.Message("a", "b"), "b already held applied lsn 42 (an earlier clone restored it); registered it: the LogPlayer delivers the tail"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
