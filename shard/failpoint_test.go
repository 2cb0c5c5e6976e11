//go:build failpoints

package shard_test

import (
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/logplayer/logplayer/internal/failpoint"
	"github.com/logplayer/logplayer/shard"
	"github.com/logplayer/logplayer/target/targettest"
	"github.com/logplayer/logplayer/types"
)

// TestCommitFailureIsNotAcked (go test -tags failpoints): a bbolt commit
// that fails (disk error, disk full) is never acknowledged: the target ends
// the stream with INTERNAL, the file keeps the last durable state, and once
// the fault clears a new stream resumes from that LSN and ends in the state
// of the whole log, nothing applied twice.
func TestCommitFailureIsNotAcked(t *testing.T) {
	dir := t.TempDir()
	const id = "shard-1"
	r := start(t, shard.Config{Dir: dir, ID: id})
	gen := targettest.NewLog()
	first := gen.Txn(targettest.Part{Topic: id, Values: [][]byte{put("a", "1")}})
	second := gen.Txn(targettest.Part{Topic: id, Values: [][]byte{put("a", "2"), put("b", "1")}})
	third := gen.Txn(targettest.Part{Topic: id, Values: [][]byte{del("a")}})

	s, _ := r.open(t, id, 1)
	if err := s.Send(first); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	for _, e := range []syscall.Errno{syscall.EIO, syscall.ENOSPC} {
		failpoint.Enable(failpoint.ShardCommit, failpoint.Action{Err: e})
		if err := s.Send(second); err != nil {
			t.Fatal(err)
		}
		err := s.Wait(ctxT(t))
		failpoint.Disable(failpoint.ShardCommit)
		if status.Code(err) != codes.Internal {
			t.Fatalf("%v: stream ended with %v, want INTERNAL", e, err)
		}
		if s.Acked() != 1 {
			t.Fatalf("%v: acked %d after a failed commit, want 1", e, s.Acked())
		}
		s, _ = r.open(t, id, 1)
		if s.Acked() != 1 {
			t.Fatalf("%v: HelloAck at lsn %d after a failed commit, want 1", e, s.Acked())
		}
	}
	if err := s.Send(second, third); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitAck(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	r.stop()
	data, st, err := shard.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedLSN != 3 || st.Topics[id] != types.Offset(4) || len(data) != 1 || string(data["b"]) != "1" {
		t.Fatalf("final state lsn %d offset %d data %q, want lsn 3, offset 4, only b=1", st.AppliedLSN, st.Topics[id], data)
	}
}
