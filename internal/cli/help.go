package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Help is a command's prose: its line in the command list, the arguments
// after its name in the usage line, what it does and examples.
type Help struct {
	Summary  string
	Synopsis string
	About    string
	Examples []string
}

// HelpFileName is the file of App.HelpFiles that holds command's help:
// "cluster add" -> "cluster-add.txt".
func HelpFileName(command string) string {
	return strings.ReplaceAll(command, " ", "-") + ".txt"
}

func (a *App) readHelp(command string) (Help, error) {
	if a.HelpFiles == nil {
		return Help{}, errors.New("no help (App.HelpFiles is nil)")
	}
	b, err := fs.ReadFile(a.HelpFiles, HelpFileName(command))
	if err != nil {
		return Help{}, err
	}
	h, err := ParseHelp(string(b))
	if err != nil {
		return Help{}, fmt.Errorf("%s: %w", HelpFileName(command), err)
	}
	return h, nil
}

// ParseHelp reads a help file:
//
//	summary: the line in the command list
//	synopsis: the arguments in the usage line (may be empty)
//
//	What the command does: any lines, up to a line
//	"examples:" alone.
//
//	examples:
//	one example a line, printed as it is (indented by two spaces)
//
// The third line is empty. The text between it and "examples:" is the
// about text, its surrounding blank lines dropped; every line after
// "examples:" is one example.
func ParseHelp(text string) (Help, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 || lines[2] != "" {
		return Help{}, errors.New(`want "summary: ...", "synopsis: ..." and an empty line first`)
	}
	summary, ok := strings.CutPrefix(lines[0], "summary: ")
	if !ok || summary == "" {
		return Help{}, errors.New(`the first line is not "summary: TEXT"`)
	}
	synopsis, ok := strings.CutPrefix(lines[1], "synopsis:")
	if !ok {
		return Help{}, errors.New(`the second line is not "synopsis: TEXT"`)
	}
	h := Help{Summary: summary, Synopsis: strings.TrimPrefix(synopsis, " ")}
	rest := lines[3:]
	i := 0
	for i < len(rest) && rest[i] != "examples:" {
		i++
	}
	h.About = strings.TrimSpace(strings.Join(rest[:i], "\n"))
	if i < len(rest) {
		h.Examples = rest[i+1:]
	}
	if h.About == "" {
		return Help{}, errors.New("no text about the command after the third line")
	}
	return h, nil
}
