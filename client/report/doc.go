// Package report is what the operator CLI (cmd/logplayer) does and shows
// of a cluster: reports built from the LogStore's and the LogPlayer's gRPC
// responses (status, registered targets, LogPlayer groups, topics), the JSON
// each prints with --json, and the tables it prints otherwise; tail's JSON
// lines (Tail, MessageOf); append's messages from its command line (Slices,
// Append); the writes of topic create, cluster, target and group delete. A
// program that wants the same views calls it with its own client.Client.
//
// An operation answers with a View (ops.go) or an error: the client's as it
// is, or one it words itself, an InputError (a wrong value in the command
// line) or a Refusal (a request that cannot succeed).
//
// It holds no connection of its own and starts no goroutine; every function
// either asks through the client.Client it is given (on the caller's
// goroutine) or only formats.
package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// HumanBytes formats n with a binary unit: 512B, 595.5KiB, 1.2GiB.
func HumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// OrDash is s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// TokenText is a fencing token, or "-" for none (0).
func TokenText(t uint64) string {
	if t == 0 {
		return "-"
	}
	return fmt.Sprint(t)
}

// table is the tab writer every table of the package uses.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }
