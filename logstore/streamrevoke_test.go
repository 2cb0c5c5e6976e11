package logstore_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

const readerPolicy = `{"grants": [
  {"identity": "writer", "role": "producer", "topics": ["orders"]},
  {"identity": "reader", "role": "consumer", "topics": ["orders"]}
]}`

// A follow Read of the LogStore (the real handler, waiting at the head)
// ends when the policy stops granting its reader the topic, within the
// server's recheck interval (one second), with PERMISSION_DENIED.
func TestRevokedReaderFollowEnds(t *testing.T) {
	ls, policyFile := startSecureStore(t, readerPolicy, "writer", "reader")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := ls["writer"].Append(ctx, &logstorepb.AppendRequest{Slices: []*logstorepb.Slice{{Topic: "orders", Messages: []*logstorepb.Message{{Value: []byte("x")}}}}}); err != nil {
		t.Fatal(err)
	}
	rs, err := ls["reader"].Read(ctx, &logstorepb.ReadRequest{FromLsn: 1, Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); err != nil {
		t.Fatalf("the reader's follow before the edit: %v", err)
	}
	end := make(chan error, 1)
	go func() {
		for {
			if _, err := rs.Recv(); err != nil {
				end <- err
				return
			}
		}
	}()
	revoked := strings.Replace(readerPolicy, `"identity": "reader", "role": "consumer", "topics": ["orders"]`, `"identity": "reader", "role": "consumer", "topics": ["other"]`, 1)
	if err := os.WriteFile(policyFile, []byte(revoked), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour) // a change the next stat sees, whatever the timestamp granularity
	if err := os.Chtimes(policyFile, later, later); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-end:
		if status.Code(err) != codes.PermissionDenied || apierr.CodeOf(err) != logstorepb.ErrorCode_PERMISSION_DENIED {
			t.Fatalf("the follow ended with %v, want PERMISSION_DENIED with its ErrorDetail", err)
		}
		t.Logf("ended %v after the edit: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the reader's follow is still open 30 s after the policy took its topic away")
	}
}
