// Package doccheck holds no code: its test checks that every Markdown file a
// comment of this repository cites exists, and that a cited section exists
// in it (issue #27 item 5).
//
// A citation is a path ending in .md, from the repository root or from the
// citing file's directory, in a comment of a .go or .proto file. It may
// name a section right after it: `docs/DESIGN.md, "LogStore"` (a heading,
// a bold label starting a line or list item, or the first cell of a table
// row that starts with those words, case aside) or `docs/SECURITY.md §5`
// (a heading numbered 5).
package doccheck
