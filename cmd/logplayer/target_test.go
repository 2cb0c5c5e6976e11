package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/devcluster"
	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/proto/logstorepb"
)

func TestTargetUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"target"}, "missing subcommand"},
		{[]string{"target", "add", "--id", "x", "--target-addr", "127.0.0.1:1"}, "missing required flag --topics"},
		{[]string{"target", "add", "--id", "x", "--topics", "a"}, "missing required flag --target-addr"},
		{[]string{"target", "add", "--id", "x", "--target-addr", "nohostport", "--topics", "a"}, "want host:port"},
		{[]string{"target", "remove"}, "missing required flag --id"},
		{[]string{"target", "describe"}, "missing required flag --id"},
		{[]string{"players", "--id", "x"}, "flag provided but not defined: --id"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, nil, tc.args...)
			wantUsage(t, code, errOut, tc.want)
		})
	}
}

// TestTargetAndPlayersAgainstCluster: the registry commands against the
// dev cluster, and the players view of a member heartbeating as the
// player identity.
func TestTargetAndPlayersAgainstCluster(t *testing.T) {
	d := startTestDev(t)
	addr := "--addr=" + strings.Join(d.StoreAddrs, ",")
	// The cluster raises its version to 3 (PlayerGroup) after its first poll.
	var code int
	var out, errOut string
	testwait.For(t, 60*time.Second, "target add accepted", func() bool {
		code, out, errOut = runCLI(t, nil, "target", "add", addr, "--id", "events-2", "--target-addr", "127.0.0.1:7999", "--topics", "orders,payments")
		return code == cli.ExitOK
	})
	if !strings.Contains(out, "registered target events-2 at 127.0.0.1:7999 (topics orders,payments)") || errOut != "" {
		t.Fatalf("target add: %q %q", out, errOut)
	}
	code, _, errOut = runCLI(t, nil, "target", "add", addr, "--id", "bad", "--target-addr", "127.0.0.1:7999", "--topics", "no good")
	wantRuntimeError(t, code, errOut, "INVALID_TOPIC")
	code, _, errOut = runCLI(t, nil, "target", "remove", addr, "--id", "nope")
	wantRuntimeError(t, code, errOut, "UNKNOWN_TARGET")
	code, _, errOut = runCLI(t, nil, "target", "describe", addr, "--id", "nope")
	wantRuntimeError(t, code, errOut, "UNKNOWN_TARGET")

	// A player joins group "players" (as the player identity, on the leader).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var token uint64
	testwait.For(t, 60*time.Second, "a heartbeat on the leader", func() bool {
		for _, a := range d.StoreAddrs {
			opts, err := d.DialOptions(devcluster.PlayerIdentity)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := grpc.NewClient(a, opts...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := logstorepb.NewPlayerGroupClient(cc).Heartbeat(ctx, &logstorepb.GroupHeartbeatRequest{Group: "players", MemberId: "p1", Incarnation: "i1"})
			cc.Close()
			if err == nil && len(r.Assignments) == 1 {
				token = r.Assignments[0].Token
				return true
			}
			if err != nil && apierr.CodeOf(err) != logstorepb.ErrorCode_NOT_LEADER {
				t.Fatalf("heartbeat: %v", err)
			}
		}
		return false
	})

	code, out, errOut = runCLI(t, nil, "players", addr, "--json")
	if code != cli.ExitOK {
		t.Fatalf("players: exit %d %q", code, errOut)
	}
	groups := jsonLines(t, out)[0]["groups"].([]any)
	g := groups[0].(map[string]any)
	members, assigned := g["members"].([]any), g["assignments"].([]any)
	if g["group"] != "players" || len(members) != 1 || members[0].(map[string]any)["member"] != "p1" ||
		members[0].(map[string]any)["lease_left_seconds"].(float64) <= 0 || len(assigned) != 1 ||
		assigned[0].(map[string]any)["member"] != "p1" || assigned[0].(map[string]any)["token"] != float64(token) {
		t.Fatalf("players --json: %s", out)
	}
	code, out, _ = runCLI(t, nil, "status", addr, "--json")
	if st := jsonLines(t, out)[0]; code != cli.ExitOK || st["registered_targets"] != 1.0 ||
		st["player_groups"].([]any)[0].(map[string]any)["owned_targets"] != 1.0 {
		t.Fatalf("status --json: %q", out)
	}
	code, out, _ = runCLI(t, nil, "status", addr)
	if code != cli.ExitOK || !strings.Contains(out, "registered targets: 1") || !strings.Contains(out, "PLAYER GROUP") {
		t.Fatalf("status: %q", out)
	}
	code, out, _ = runCLI(t, nil, "players", addr)
	if code != cli.ExitOK || !strings.Contains(out, "group players: 1 members") || !strings.Contains(out, "events-2") {
		t.Fatalf("players: %q", out)
	}
	code, out, _ = runCLI(t, nil, "target", "describe", addr, "--id", "events-2", "--json")
	tj := jsonLines(t, out)
	if code != cli.ExitOK || tj[0]["address"] != "127.0.0.1:7999" || len(tj[0]["owners"].([]any)) != 1 {
		t.Fatalf("target describe: %q", out)
	}
	code, out, _ = runCLI(t, nil, "target", "list", addr)
	if code != cli.ExitOK || !strings.Contains(out, "events-2") || !strings.Contains(out, "p1") {
		t.Fatalf("target list: %q", out)
	}
	code, out, _ = runCLI(t, nil, "target", "remove", addr, "--id", "events-2", "--json")
	if code != cli.ExitOK || jsonLines(t, out)[0]["ok"] != true {
		t.Fatalf("target remove: %q", out)
	}
	code, out, _ = runCLI(t, nil, "target", "list", addr, "--json")
	if code != cli.ExitOK || len(jsonLines(t, out)[0]["targets"].([]any)) != 0 {
		t.Fatalf("target list after remove: %q", out)
	}
}
