// Package tier is the LogStore's tiered storage: it uploads sealed segments
// (and their index files) to S3-compatible object storage before local
// retention may delete them, and serves reads below the local log's first
// LSN from those objects (segment.Below), checking every object's SHA-256
// before a record of it is served.
//
// # Objects
//
// Under the URL's prefix, for each uploaded segment holding LSNs
// first..last (zero-padded to 20 digits, so names sort like LSNs):
//
//	segments/<first>-<last>.seg   the segment file, byte for byte
//	segments/<first>-<last>.idx   its index file
//	segments/<first>-<last>.json  the manifest (Manifest): sizes and SHA-256
//	                              of both, the topics' offset ranges
//
// The manifest is written last, after both data objects were read back
// and their size and SHA-256 matched the local files: a segment counts as
// uploaded exactly when its manifest exists, so an upload cut short (the
// node killed, the store down) leaves no manifest and is redone from the
// start. Every replica writes the same bytes for the same LSNs, so nodes
// may share a prefix: a node that finds a manifest whose SHA-256 matches
// its own file adopts it instead of uploading again.
//
// With SetSnapshots the uploader also copies the node's newest Raft
// snapshot under snapshots/<id>/, by the same rule (see snapshot.go).
//
// # Retention
//
// Uploaded(first, last) reports whether the manifests uploaded or adopted
// by this node (or listed at start) cover the LSNs; logstore's retention
// deletes a sealed segment only then. While the object store is down,
// uploads retry with exponential backoff (capped at Config.RetryMax) and
// retention waits; the upload lag (segments and bytes sealed locally but
// not uploaded) is in Stats.
//
// # Reads
//
// Read downloads a segment's two objects into the cache directory
// (Config.CacheDir, at most Config.CacheBytes, least recently used first
// out), hashing them as they arrive; an object whose size or SHA-256 differs
// from its manifest is never served: the read fails with a *ChecksumError
// (errors.Is ErrChecksum) and Stats.ChecksumFailures counts it. The cached
// copy is opened with segment.OpenSealed, which checks it again against the
// index (size, CRC-32C), and each record's CRC as it is read.
//
// # Goroutines
//
// One, the uploader (Tier.Run, started by the caller, ended by cancelling
// its context): it lists the manifests once (retrying until the store
// answers), then every Config.ScanInterval uploads the sealed segments of
// the log not yet covered, oldest first, one at a time, each with its own
// backoff loop; every Config.RelistInterval (5 min) it lists again and
// reads the manifests it does not know (other nodes' uploads). Readers (any number of goroutines) call Read and
// TopicOffsetLSN; a download runs on the reader's goroutine, one per
// segment at a time (singleflight), bounded by Config.ReadTimeout.
//
// Locks: mu guards the catalog (the manifests known) and the cache's
// entries; it is a leaf, never held across I/O.
package tier
