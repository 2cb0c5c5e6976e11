package main

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnly are packages that belong in test builds only: a test helper
// (each fails or waits on a *testing.T), or the fake clock of
// testing/synctest.
var testOnly = []string{
	"testing/synctest",
	"github.com/logplayer/logplayer/internal/testwait",
	"github.com/logplayer/logplayer/internal/testmetric",
	"github.com/logplayer/logplayer/internal/pgtest",
	"github.com/logplayer/logplayer/logstore/logstoretest",
	"github.com/logplayer/logplayer/target/targettest",
	"github.com/logplayer/logplayer/internal/grpcedge/edgetest",
}

// testingImporters may import "testing" in the shipped binary: a library
// we cannot change (hashicorp/raft's testing.go, its in-memory transport
// helpers, is in package raft itself).
var testingImporters = map[string]bool{"github.com/hashicorp/raft": true}

// TestShippedBinaryDeps: the logplayer binary holds what it serves (issue
// #27 item 6): no plotting library (charts are cmd/logplayer-bench's), no
// test helper or test clock, and no package of this module that imports
// "testing".
func TestShippedBinaryDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 100 || !strings.HasPrefix(lines[len(lines)-1], "github.com/logplayer/logplayer/cmd/logplayer ") {
		t.Fatalf("go list -deps output not understood (%d lines, last %q)", len(lines), lines[len(lines)-1])
	}
	for _, l := range lines {
		pkg, imports, _ := strings.Cut(l, " ")
		if strings.HasPrefix(pkg, "gonum.org/") {
			t.Errorf("logplayer links %s: plotting belongs in cmd/logplayer-bench", pkg)
		}
		for _, p := range testOnly {
			if pkg == p {
				t.Errorf("logplayer links %s, which belongs in test builds only", pkg)
			}
		}
		for _, imp := range strings.Fields(imports) {
			if imp == "testing" && !testingImporters[pkg] {
				t.Errorf("logplayer links %s, which imports \"testing\"", pkg)
			}
		}
	}
}
