package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// floors are the layers of docs/LAYOUT.md, bottom first. A package sits on
// the floor of the longest prefix (a path, or a path and "/...") that
// matches it; it may import packages of its own floor and the floors below.
var floors = []struct {
	name     string
	prefixes []string
}{
	{"words", []string{"types", "proto", "apierr"}},
	{"shared libraries", []string{"internal/quantile", "internal/jsoncrc", "internal/vfs", "internal/failpoint",
		"internal/grpcwindow", "internal/poll", "internal/raftlog", "internal/grpcedge", "internal/metric", "security"}},
	{"storage", []string{"logstore/segment", "logstore/tier"}},
	{"node", []string{"logstore", "logstore/fsm", "logstore/schema"}},
	{"edge", []string{"logstore/api"}},
	{"client", []string{"internal/storeconn", "client", "client/report"}},
	{"engine", []string{"targetqueue", "dispatcher", "fetcher", "logplayer"}},
	{"targets", []string{"target", "shard"}},
	{"assembly", []string{"internal/serve", "demo", "devcluster",
		"logstore/bench", "logplayer/bench", "target/sqlstore/sqlbench",
		"logstore/logstoretest", "target/targettest", "fetcher/fetchertest", "internal/grpcedge/edgetest",
		"internal/pgtest", "internal/testwait", "internal/testhttp", "internal/testmetric", "internal/boltcrash", "internal/fakes3", "internal/doccheck",
		"internal/cli"}},
	{"commands", []string{"cmd", "e2e", "deploy", "sdk"}},
}

// upwardAllowed are today's imports of a higher floor, each with the
// reason it is tolerated: known exceptions, so that no new one appears
// unnoticed. Remove a line when its import goes.
var upwardAllowed = map[string]string{
	"logstore -> logstore/api": "the node wires its own edge (its metrics, its Aggregator, which the node's own commands use too, api.Register in Node.RegisterServices with the node as api.Node, logstore/edge.go) and keeps the edge's limits under their old names; the handlers live in logstore/api (issue #26)",
}

const modulePrefix = "github.com/logplayer/logplayer/"

// floorOf returns pkg's floor index and the prefix that placed it, or -1.
func floorOf(pkg string) (int, string) {
	best, bestPrefix := -1, ""
	for i, f := range floors {
		for _, p := range f.prefixes {
			if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(bestPrefix) {
				best, bestPrefix = i, p
			}
		}
	}
	return best, bestPrefix
}

// TestNoUpwardImports: no package imports one on a higher floor, but for
// the known exceptions; every package has a floor.
func TestNoUpwardImports(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], modulePrefix)
		if pkg == fields[0] {
			continue // the module root has no package
		}
		pkgs++
		from, _ := floorOf(pkg)
		if from < 0 {
			t.Errorf("%s has no floor: place it in docs/LAYOUT.md and in floors (internal/doccheck/layout_test.go)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, modulePrefix)
			if !ok {
				continue
			}
			to, _ := floorOf(dep)
			if to <= from {
				continue
			}
			key := pkg + " -> " + dep
			seen[key] = true
			if _, ok := upwardAllowed[key]; !ok {
				t.Errorf("%s (floor %q) imports %s (floor %q, above it): move the code to the floor where it belongs (docs/LAYOUT.md)", pkg, floors[from].name, dep, floors[to].name)
			}
		}
	}
	if pkgs < 40 {
		t.Fatalf("go list listed %d packages: output not understood", pkgs)
	}
	for key := range upwardAllowed {
		if !seen[key] {
			t.Errorf("known exception %q no longer occurs: delete it from upwardAllowed and docs/LAYOUT.md", key)
		}
	}
}

// TestLayoutDocNamesEveryFloor: docs/LAYOUT.md shows every floor's name and
// every prefix above, and every known exception, so the page and the check
// are one table.
func TestLayoutDocNamesEveryFloor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "LAYOUT.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, f := range floors {
		if !strings.Contains(doc, "| "+f.name+" |") {
			t.Errorf("docs/LAYOUT.md has no row for floor %q", f.name)
		}
		for _, p := range f.prefixes {
			if !strings.Contains(doc, "`"+p+"`") {
				t.Errorf("docs/LAYOUT.md does not name `%s` (floor %q)", p, f.name)
			}
		}
	}
	for key := range upwardAllowed {
		if !strings.Contains(doc, "`"+key+"`") {
			t.Errorf("docs/LAYOUT.md does not list the known exception `%s`", key)
		}
	}
}
