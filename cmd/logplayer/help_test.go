package main

import (
	"flag"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/logplayer/logplayer/internal/cli"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help.golden from the commands' help")

// Every registered command has a help file (app.Register panics at init
// without one) and every help file a command.
func TestHelpFilesMatchCommands(t *testing.T) {
	files, err := fs.Glob(helpFiles, "help/*")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range app.Commands() {
		names = append(names, "help/"+cli.HelpFileName(c.Name))
	}
	for _, f := range files {
		if !slices.Contains(names, f) {
			t.Errorf("%s is the help of no command", f)
		}
	}
	if len(files) != len(names) {
		t.Errorf("%d help files, %d commands", len(files), len(names))
	}
}

// `logplayer help` and every `logplayer <command> --help` print what
// testdata/help.golden holds (first written from the binary built before
// the help prose moved into help/*.txt; -update-help rewrites it).
func TestHelpGolden(t *testing.T) {
	var b strings.Builder
	add := func(args ...string) {
		code, out, errOut := runCLI(t, nil, args...)
		if code != cli.ExitOK || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		b.WriteString("=== logplayer " + strings.Join(args, " ") + "\n" + out)
	}
	add("help")
	for _, c := range app.Commands() {
		add(append(strings.Fields(c.Name), "--help")...)
	}
	const golden = "testdata/help.golden"
	if *updateHelp {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("help differs from %s at line %d:\n got %q\nwant %q\n(go test -run TestHelpGolden -update-help rewrites it)", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("help has %d lines, %s %d", len(gl), golden, len(wl))
	}
}
