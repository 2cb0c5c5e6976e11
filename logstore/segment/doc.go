// Package segment is the LogStore's storage: an append-only log of
// CRC-framed records, one per committed transaction, split into segment
// files, with sparse indexes for LSN, Raft index and per-topic offset lookups
// (docs/DESIGN.md, "Storage and crash safety", and docs/DESIGN.md,
// "Snapshots and retention").
//
// # Files
//
// A directory holds segment files named by the zero-padded LSN of their first
// record, 00000000000000000001.seg, and for each sealed segment an index file
// of the same name with .idx. The last segment is the active one; every
// other is sealed (immutable, fsynced, indexed). A segment file is a plain
// sequence of records (little-endian):
//
//	[length uint32][crc uint32][payload: length bytes]
//
// where crc is the CRC-32C (Castagnoli) of the payload and the payload the
// deterministic protobuf encoding of one logstorepb.Transaction, so replicas
// that apply the same transactions write identical files. Lengths are 1 to
// MaxRecordBytes. An index file (format in index.go) holds the segment's
// summary (LSN range, size, CRC of the whole file, Raft index and timestamp
// range), a sparse LSN→position index (one entry every IndexIntervalBytes,
// with the record's Raft index) and per topic the offset range and a sparse
// offset→(LSN, position) index (one entry every TopicIndexIntervalBytes),
// protected by a trailing CRC-32C.
//
// # Crash safety
//
// AppendBatch does not fsync: the Raft log is the write-ahead log. (Every
// WritebackBytes it asks the kernel to start writing back, without waiting,
// so that the fsync which seals a full segment finds little left to write.)
// A torn write can only cut the tail of a segment not yet durable (a
// transaction is one record in one file), and Open truncates the active
// segment after its last record that has a good CRC, decodes, and continues
// the LSN, Raft index and topic offsets. Sealing does not fsync on the
// writer's path either: the writer builds the index, creates the next
// segment file and hands the sealed segment to the sealer goroutine
// (sealer.go), which fsyncs it, then writes its index file by rename and
// fsyncs the directory, one segment at a time in seal order. So an index
// file on disk always describes a durable segment; a non-last segment
// without one is a seal that did not finish before a crash, and Open scans
// it like an active segment: whole, it gets its index; torn, it becomes the
// active segment and the later segments are removed (their records were
// not durable, so they lie above the last checkpoint and Raft applies them
// again). A crash before the next file exists leaves the old segment
// active (a stale index is dropped and rebuilt). Sync, and Checkpoint which
// calls it, wait for the sealer and make everything appended so far
// durable; the caller must Sync (or Checkpoint) up to a Raft index before
// Raft compacts below it. A failed fsync is sticky (ErrNotDurable): every
// later AppendBatch, Sync and Checkpoint returns it.
//
// Every file operation goes through Options.FS (internal/vfs), so tests
// run the log on a crashable in-memory filesystem that loses what was not
// fsynced (powerloss_test.go), and through internal/failpoint under the
// build tag failpoints (failpoint_test.go). After Open the caller drops records above its
// last durable snapshot with TruncateAfterRaftIndex and lets Raft apply them
// again. Open reads only the index files of sealed segments (and checks each
// file's size), so a restart costs time in proportion to the active segment;
// corruption inside a sealed segment is found when it is read (ErrCorrupt).
//
// The LogStore's recovery, in order: Open; TruncateAfterRaftIndex(the last
// durable snapshot's Raft index) so that Raft's replay appends the same LSNs
// again; then, if LastLSN() is below the snapshot's last LSN
// (Manifest.LastLSN), records that Raft can no longer replay were lost
// (damage beyond a torn tail) and the node must Install a checkpoint. A
// snapshot is Checkpoint(dir, its last LSN); restoring one received from the
// leader is Manifest.ReadFiles then Install.
//
// Bytes a reader may read never change: a file is only appended to past the
// size readers know, Open truncates before any reader exists, and
// TruncateAfterRaftIndex and Install write new files (new inodes) instead of
// changing old ones. Readers read through open descriptors with ReadAt, so
// removing a file (retention, truncation, Install) does not disturb a read
// in progress (segment reference counts keep descriptors open). Since a
// sealed file may be hard-linked by a checkpoint, no sealed file is ever
// written again: one that must become active is copied first.
//
// # Concurrency
//
// One goroutine, the sealer (started by Open, stopped by Close after the
// seals already queued; fed by the writer through a queue of at most
// sealQueueMax sealed segments, the writer waiting when it is full). One
// writer (the FSM apply goroutine) calls
// AppendBatch (the records of one Raft entry with one write call),
// TruncateAfterRaftIndex and Install; any number of readers call Get, Read,
// TopicOffsetLSN and the accessors; Checkpoint, Sync, DeleteBefore and
// Segments may run on other goroutines (a snapshot, a retention loop).
//
// Locks, in order: wmu serializes the writer's methods; fileMu serializes the
// methods that remove or replace files (DeleteBefore, TruncateAfterRaftIndex,
// Install, Close) with Checkpoint, which links them (AppendBatch never takes it);
// mu (a RWMutex) guards the segment list and each segment's counters and
// in-memory index. mu is held only for in-memory work: a reader takes it to
// find positions and a reference, then reads without it; the writer writes
// the record first and takes mu only to publish it. No lock is held across
// I/O except fileMu (across a checkpoint's links and copy). sealer.mu (the
// seal queue and the sticky failure) is a leaf, never held across I/O; the
// sealer takes no other lock. The methods that remove or replace files
// (DeleteBefore, TruncateAfterRaftIndex, Install) first wait for the seals
// queued before them, so the sealer never writes the index of a segment
// being removed.
//
// Invariants: LSNs are dense: segment i+1 starts at the LSN after segment
// i's last, and LastLSN is the active segment's last (FirstLSN-1 when the log
// is empty); Raft indexes never decrease along the log; within a segment each
// topic's offsets are dense and a topic appears at most once per record; a
// record is visible to Get and Read exactly when AppendBatch has returned.
//
// Numbers: LSNs are types.LSN and topic offsets types.Offset throughout the
// API and the indexes; Raft indexes and counts stay plain uint64, and the
// transactions themselves (logstorepb) keep their uint64 fields.
package segment
