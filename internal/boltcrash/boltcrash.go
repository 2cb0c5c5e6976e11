// Package boltcrash models what a power loss during one bbolt commit may
// leave on disk, for the power-loss tests of the bbolt targets (the shard,
// the events target's EventLog). bbolt mmaps a real file, so these targets
// cannot run on the crashable in-memory filesystem of the segment log
// (internal/vfs); their tests instead record the file after every commit
// and build crash images between two consecutive ones with Image (Between
// also picks the two).
//
// The model follows bbolt's commit protocol (go.etcd.io/bbolt, tx.Commit):
// a commit first grows the file if it must (truncate, then fsync, so the
// new length is durable before any page of the commit is written), writes
// its data pages (branches, leaves, the freelist unless NoFreelistSync) to
// free pages, never over a page of the last committed tree, fdatasyncs,
// then writes one meta page (page txid%2; the other meta page keeps the
// last commit) and fdatasyncs again. Between the two commits the disk may
// so hold:
//
//   - DataPagesOnly: any subset of the new data pages, with the old meta
//     pages: bbolt opens at the old commit;
//   - WholeCommit: every new page, the file of the new commit: bbolt opens
//     at the new commit;
//   - TornMeta: every new data page and a prefix of the new meta page (0 to
//     95 bytes: the page header is 16 bytes, the meta struct and its
//     checksum end at byte 80) over the old one: bbolt opens at the old
//     commit when the checksum fails or the meta is still the old one, at
//     the new commit when the prefix covers the whole meta struct.
//
// What it does not model: writes reordered across an fdatasync (the disk
// honours flushes), a torn data page of the commit in flight beyond
// "written or not" at page granularity (bbolt never reads those pages from
// the old meta's tree), a damaged page of a committed tree (bit rot), and
// more than one commit between old and new (then pages of the later commit
// may overwrite pages the earlier one freed, which only its durable meta
// page makes safe; Image would build images no disk can hold).
package boltcrash

import (
	"bytes"
	"math/rand/v2"
)

// The shapes Image returns.
const (
	DataPagesOnly = "data pages only"
	WholeCommit   = "whole commit"
	TornMeta      = "torn meta page"
)

// Image returns a file a power loss between the commits whose files are old
// and new (recorded after each commit's last fdatasync, new one commit
// after old) could leave, and names its shape. The shape and the pages come
// from rng; the same rng state gives the same image.
func Image(rng *rand.Rand, old, new []byte, pageSize int) (img []byte, shape string) {
	img = make([]byte, len(new))
	copy(img, old)
	var data, meta []int // pages that differ
	for p := 0; p*pageSize < len(new); p++ {
		a, b := page(old, p, pageSize), page(new, p, pageSize)
		if bytes.Equal(a, b) {
			continue
		}
		if p < 2 {
			meta = append(meta, p)
		} else {
			data = append(data, p)
		}
	}
	put := func(p, n int) { copy(img[p*pageSize:p*pageSize+n], new[p*pageSize:]) }
	switch rng.IntN(3) {
	case 0:
		for _, p := range data {
			if rng.IntN(2) == 0 {
				put(p, pageSize)
			}
		}
		return img, DataPagesOnly
	case 1:
		for _, p := range append(data, meta...) {
			put(p, pageSize)
		}
		return img, WholeCommit
	default:
		for _, p := range data {
			put(p, pageSize)
		}
		for _, p := range meta {
			put(p, rng.IntN(96)) // inside the meta struct and its checksum
		}
		return img, TornMeta
	}
}

// Between picks two consecutive commits k and k+1 of files (the file
// after each commit, in order) from rng and returns a crash image between
// them as Image does.
func Between(rng *rand.Rand, files [][]byte, pageSize int) (k int, img []byte, shape string) {
	k = rng.IntN(len(files) - 1)
	img, shape = Image(rng, files[k], files[k+1], pageSize)
	return k, img, shape
}

// page is page p of the file b (shorter at the end of b, empty past it).
func page(b []byte, p, size int) []byte {
	lo, hi := min(p*size, len(b)), min((p+1)*size, len(b))
	return b[lo:hi]
}
