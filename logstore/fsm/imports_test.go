package fsm

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// forbidden are the packages whose import would let apply read something
// besides the entry: a clock, the environment or the filesystem,
// randomness, the node's configuration, or Raft itself.
var forbidden = []string{
	"time", "os", "os/exec", "os/signal", "syscall", "net", "net/http",
	"math/rand", "math/rand/v2", "crypto/rand", "runtime",
	"github.com/logplayer/logplayer/logstore",
	"github.com/logplayer/logplayer/logstore/segment",
	"github.com/hashicorp/raft",
}

// allowedThirdParty are the packages outside this module and the standard
// library the core may import: the protobuf runtime (for the generated
// protos) and gRPC's status (for apierr's error values). The generated
// protos also hold the gRPC service stubs, so logstorepb may import gRPC,
// and the google.api.http options of its REST routes (descriptors only).
var allowedThirdParty = map[string][]string{
	"":                           {"google.golang.org/protobuf/", "google.golang.org/grpc/status", "google.golang.org/grpc/codes"},
	module + "/proto/logstorepb": {"google.golang.org/protobuf/", "google.golang.org/grpc", "google.golang.org/genproto/googleapis/api/annotations"},
}

// payloadFloors are the trees of the targets and the reference shard: the
// core checks a topic's messages through the validators registered in
// package logstore/schema and knows no payload format, so nothing it
// imports, directly or not, lies under them (issue #27 item 2).
var payloadFloors = []string{module + "/shard", module + "/target"}

const module = "github.com/logplayer/logplayer"

// coreOfLogstore are the packages under logstore/ the core may import: its
// own, and the schema registry (pure; its validators are checked by
// TestNoPayloadFormat's floors and by their own purity contract).
var coreOfLogstore = []string{module + "/logstore/fsm", module + "/logstore/schema"}

// TestImportBoundary: the deterministic core imports, directly or through
// any package of this module, nothing that could make replicas diverge.
// Packages outside the module (protobuf, gRPC status) are not walked: they
// are libraries with no say in what apply decides.
func TestImportBoundary(t *testing.T) {
	checkImports(t, goListDeps(t))
}

// TestNoPayloadFormat: the core and everything it imports (not its tests)
// lie outside shard/ and target/; schemas plug in through logstore/schema.
func TestNoPayloadFormat(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/logstore/schema") {
		t.Fatalf("go list -deps does not list logstore/schema: output not understood: %v", deps)
	}
	for _, d := range deps {
		for _, floor := range payloadFloors {
			if d == floor || strings.HasPrefix(d, floor+"/") {
				t.Errorf("logstore/fsm depends on %s: the deterministic core must know no target's payload format (register a schema.Validator instead)", d)
			}
		}
	}
}

func goListDeps(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return out
}

type listed struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Module     *struct{ Path string }
}

func checkImports(t *testing.T, goList []byte) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(goList)))
	walked := 0
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		walked++
		allowed, ok := allowedThirdParty[p.ImportPath]
		if !ok {
			allowed = allowedThirdParty[""]
		}
		for _, imp := range p.Imports {
			for _, f := range forbidden {
				if imp == f || strings.HasPrefix(imp, f+"/") && !hasAnyPrefix(imp, coreOfLogstore) {
					t.Errorf("%s imports %s: the apply core must read nothing but the entry and its state", p.ImportPath, imp)
				}
			}
			first, _, _ := strings.Cut(imp, "/")
			if strings.Contains(first, ".") && !strings.HasPrefix(imp, module+"/") && !hasAnyPrefix(imp, allowed) {
				t.Errorf("%s imports %s, outside the module, the standard library and %v", p.ImportPath, imp, allowed)
			}
		}
	}
	if walked < 3 { // fsm, apierr, logstorepb at least
		t.Fatalf("walked %d module packages: go list output not understood", walked)
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
