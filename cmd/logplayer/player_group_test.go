package main

import (
	"bytes"
	"testing"

	"github.com/logplayer/logplayer/internal/cli"
)

// player --group makes a group member: --target registers targets, the
// admin address is what DescribeGroup shows, the margin is passed on.
func TestPlayerGroupFlags(t *testing.T) {
	s := &cli.Sys{Stderr: &bytes.Buffer{}}
	r, err := app.Parse("player", []string{"--store", "127.0.0.1:7400", "--group", "players", "--lease-margin", "0.2",
		"--heartbeat-interval", "400ms", "--target", "a=127.0.0.1:7430/t"}, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.(*playerCmd).config(s)
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Group
	if g == nil || g.Name != "players" || g.LeaseMargin != 0.2 || g.HeartbeatInterval.String() != "400ms" || g.AdminAddress != "127.0.0.1:7420" {
		t.Fatalf("group config %+v", g)
	}
	if len(cfg.Targets) != 1 || cfg.Targets[0].ID != "a" {
		t.Fatalf("targets %+v", cfg.Targets)
	}

	r, err = app.Parse("player", []string{"--store", "127.0.0.1:7400"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := r.(*playerCmd).config(s); cfg.Group != nil {
		t.Fatal("a player without --group is a group member")
	}
}

func TestPlayerGroupBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"player", "--store", "127.0.0.1:1", "--group", "players", "--lease-margin", "0.7"}, "lease margin"},
		{[]string{"player", "--store", "127.0.0.1:1", "--group", "bad name"}, "group name"},
	} {
		code, _, errOut := runCLI(t, nil, tc.args...)
		wantUsage(t, code, errOut, tc.want)
	}
}
