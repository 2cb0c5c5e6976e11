package doccheck

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citation is a .md path, then maybe a section: `, "Name"` or `§N`.
var citation = regexp.MustCompile(`((?:\.\./)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)\b(?:,?\s*"([^"]+)"|\s*§(\d+))?`)

// TestCitedDocsExist: every .md file a comment cites exists, and so does the
// section it names.
func TestCitedDocsExist(t *testing.T) {
	root := repoRoot(t)
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		var comments []string
		switch filepath.Ext(path) {
		case ".go":
			comments = goComments(t, path)
		case ".proto":
			comments = protoComments(t, path)
		default:
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, c := range comments {
			for _, m := range citation.FindAllStringSubmatch(c, -1) {
				cited++
				if err := checkCitation(root, rel, m[1], m[2], m[3]); err != nil {
					t.Error(err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 20 {
		t.Fatalf("found %d citations: the walk or the pattern is broken", cited)
	}
}

// checkCitation says what is wrong with from's citation of doc (and
// section or number), or nil.
func checkCitation(root, from, doc, section, number string) error {
	var path string
	for _, p := range []string{filepath.Join(root, doc), filepath.Join(root, filepath.Dir(from), doc)} {
		if _, err := os.Stat(p); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		return fmt.Errorf("%s cites %s, which is not in the repository", from, doc)
	}
	if section == "" && number == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	headings, labels := anchors(string(b))
	switch {
	case number != "":
		for _, h := range headings {
			if strings.HasPrefix(h, number+".") {
				return nil
			}
		}
		return fmt.Errorf("%s cites %s §%s, which has no section %s", from, doc, number, number)
	default:
		want := strings.ToLower(strings.Join(strings.Fields(section), " "))
		for _, a := range append(headings, labels...) {
			if strings.HasPrefix(strings.ToLower(a), want) {
				return nil
			}
		}
		return fmt.Errorf("%s cites %s, %q: no heading, bold label or table row of %s starts so", from, doc, section, doc)
	}
}

// The checker itself: what counts as a section, and what does not.
func TestCheckCitation(t *testing.T) {
	root := t.TempDir()
	md := "# Title\n\n## 2. Glossary\n\n### Storage and crash safety\n\n- **Assignment** (x)\n\n| registered producers (issue 12) | y |\n\n```\n## Not a heading\n```\n"
	if err := os.WriteFile(filepath.Join(root, "D.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		doc, section, number string
		ok                   bool
	}{
		{"D.md", "", "", true},
		{"E.md", "", "", false},
		{"D.md", "Glossary", "", true},
		{"D.md", "storage and  crash", "", true},
		{"D.md", "Assignment", "", true},
		{"D.md", "Registered producers", "", true},
		{"D.md", "Not a heading", "", false},
		{"D.md", "Retention", "", false},
		{"D.md", "", "2", true},
		{"D.md", "", "3", false},
	} {
		err := checkCitation(root, "x/y.go", tc.doc, tc.section, tc.number)
		if (err == nil) != tc.ok {
			t.Errorf("%s %q §%s: %v, want ok=%v", tc.doc, tc.section, tc.number, err, tc.ok)
		}
	}
}

var (
	bold      = regexp.MustCompile(`^(?:[-*] |\d+\. )?\*\*([^*]+)\*\*`)
	tableCell = regexp.MustCompile(`^\|\s*([^|]+?)\s*\|`)
	numbered  = regexp.MustCompile(`^\d+\.\s+`)
)

// anchors returns a Markdown file's headings (without '#'s, with their
// numbers) and its labels: the headings without their numbers, bold text
// that starts a line or a list item, and first cells of table rows.
func anchors(md string) (headings, labels []string) {
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		switch {
		case strings.HasPrefix(line, "#"):
			h := strings.TrimSpace(strings.TrimLeft(line, "#"))
			headings = append(headings, h)
			labels = append(labels, numbered.ReplaceAllString(h, ""))
		case bold.MatchString(line):
			labels = append(labels, bold.FindStringSubmatch(line)[1])
		case tableCell.MatchString(line):
			labels = append(labels, strings.Trim(tableCell.FindStringSubmatch(line)[1], "`"))
		}
	}
	return headings, labels
}

// goComments returns a Go file's comment groups, each on one line.
func goComments(t *testing.T, path string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	var out []string
	for _, g := range f.Comments {
		out = append(out, strings.Join(strings.Fields(g.Text()), " "))
	}
	return out
}

// protoComments returns a .proto file's runs of // comment lines, each on
// one line.
func protoComments(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var run []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, c, ok := strings.Cut(sc.Text(), "//"); ok {
			run = append(run, c)
			continue
		}
		if len(run) > 0 {
			out = append(out, strings.Join(strings.Fields(strings.Join(run, " ")), " "))
			run = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return append(out, strings.Join(strings.Fields(strings.Join(run, " ")), " "))
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
