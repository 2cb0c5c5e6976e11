// Package types names the protocol numbers shared by every LogPlayer package,
// so a signature says which number it means (DESIGN.md §2).
package types

// LSN is the log sequence number of a committed transaction: dense 1, 2, 3, …
// assigned at apply. 0 means "nothing yet".
type LSN = uint64

// Offset is the dense per-topic position of a message: 0, 1, 2, …
type Offset = uint64

// Term is a LogPlayer-side per-target generation, starting at 1 and bumped
// each time the target returns.
type Term = uint64

// Epoch is a LogPlayer instance generation, committed in the LogStore;
// targets refuse streams from an older epoch.
type Epoch = uint64

// TargetID names a delivery target.
type TargetID = string
