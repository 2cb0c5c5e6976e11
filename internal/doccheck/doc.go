// Package doccheck holds no code, only tests of the documents against the
// tree (issue #27 items 4 and 5):
//   - doccheck_test.go: every Markdown file a comment of this repository
//     cites exists, and so does the section it names;
//   - layout_test.go: every package stands on a floor of docs/LAYOUT.md
//     and imports nothing on a higher floor, but for the known exceptions
//     listed there; the page and the test name the same floors.
//
// A citation is a path ending in .md, from the repository root or from the
// citing file's directory, in a comment of a .go or .proto file. It may
// name a section right after it: `docs/DESIGN.md, "LogStore"` (a heading,
// a bold label starting a line or list item, or the first cell of a table
// row that starts with those words, case aside) or `docs/SECURITY.md §5`
// (a heading numbered 5).
package doccheck
