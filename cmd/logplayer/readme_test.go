package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readme returns the repository's README.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's configuration reference names every flag of every server
// role, so it cannot silently fall behind the code.
func TestREADMEDocumentsServerFlags(t *testing.T) {
	doc := readme(t)
	for _, c := range app.Commands() {
		if !c.Server && c.Name != "dev" {
			continue
		}
		section := "### `logplayer " + c.Name + "`"
		i := strings.Index(doc, section)
		if i < 0 {
			t.Fatalf("README has no section %q", section)
		}
		body := doc[i+len(section):]
		if j := strings.Index(body, "\n## "); j >= 0 {
			body = body[:j]
		}
		if j := strings.Index(body, "\n### "); j >= 0 {
			body = body[:j]
		}
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.New().Flags(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(body, "`--"+f.Name) && !strings.Contains(body, ", `--"+f.Name) {
				t.Errorf("README section %q does not document --%s", section, f.Name)
			}
		})
	}
}

// The README's example config file is accepted by `logplayer store`.
func TestREADMEConfigExample(t *testing.T) {
	doc := readme(t)
	start := strings.Index(doc, "```json\n")
	if start < 0 {
		t.Fatal("README has no JSON config example")
	}
	body := doc[start+len("```json\n"):]
	example := body[:strings.Index(body, "```")]
	c, err := parseStore(t, map[string]string{"LOGPLAYER_CONFIG": writeFile(t, "n1.json", example)})
	if err != nil {
		t.Fatalf("README config example: %v", err)
	}
	if c.id != "n1" || len(c.peers.Peers) != 3 || c.retentionBytes.Bytes != 4<<30 {
		t.Fatalf("README config example parsed as id %q, %d peers, retention %d", c.id, len(c.peers.Peers), c.retentionBytes.Bytes)
	}
}
