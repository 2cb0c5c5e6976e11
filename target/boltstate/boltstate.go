// Package boltstate keeps a target.State in a bbolt file, in the same
// transaction as the target's data: the part every bbolt-backed target
// (the reference shard in shard/, the events target's demo.EventLog) has
// in common, so that a new one writes only its data code.
//
// On-disk layout of the State (the same keys in every such file):
//
//	meta/format           Layout.Format: the target's kind and layout
//	                      version, checked at every open and load
//	meta/applied_lsn      State.AppliedLSN, 8 bytes big-endian (absent: 0)
//	meta/epoch            State.Epoch, 8 bytes big-endian (absent: 0)
//	meta/log_cluster_id   State.LogClusterID, UTF-8, at most
//	meta/log_incarnation  State.LogIncarnation  MaxLogIdentityBytes each
//	                      (absent or empty: none yet, the first Hello that
//	                      carries one is adopted)
//	offsets/<topic>       State.Topics[topic] (next offset), 8 bytes big-endian
//
// next to the target's own buckets (Layout.Buckets). This is the layout
// the shard (format 1) and the event log ("logplayer-eventlog/1") wrote
// before this package existed; their files written then open unchanged
// (shard/format_test.go, demo/eventlog_format_test.go).
//
// The target opens its file with Layout.Open, reads the State with Load
// and, in the bbolt transaction that changes its data, writes the new
// State with Save. One bbolt transaction (fsynced on commit) so changes
// data and State together: they never disagree after a crash.
//
// A file that is not one of the layout (no bbolt file at all, another
// target's file, a damaged key) is refused with a *FormatError naming the
// file and the key, which wraps ErrFormat and the Layout's own Kind.
// Nothing here starts goroutines or keeps state between calls.
package boltstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/logplayer/logplayer/target"
	"github.com/logplayer/logplayer/types"
)

// The State's buckets and keys (see the package comment).
var (
	BucketMeta        = []byte("meta")
	BucketOffsets     = []byte("offsets")
	KeyFormat         = []byte("format")
	KeyAppliedLSN     = []byte("applied_lsn")
	KeyEpoch          = []byte("epoch")
	KeyLogClusterID   = []byte("log_cluster_id")
	KeyLogIncarnation = []byte("log_incarnation")
)

// MaxLogIdentityBytes bounds each stored part of the log identity: the
// LogStore's are 16 hex digits; a longer stored value is a damaged file.
const MaxLogIdentityBytes = 256

// ErrFormat is wrapped by every *FormatError: a file that is not a bbolt
// file of the expected layout, or a damaged one.
var ErrFormat = errors.New("boltstate: damaged or foreign file")

// FormatError says which file and which key are not of the layout. It
// wraps ErrFormat and the Layout's Kind (when set).
type FormatError struct {
	File    string // the bbolt file's path
	Key     string // "bucket/key", a bucket name, or "" for the whole file
	Problem string
	Kind    error // Layout.Kind, or nil
}

func (e *FormatError) Error() string {
	kind := ErrFormat
	if e.Kind != nil {
		kind = e.Kind
	}
	if e.Key == "" {
		return fmt.Sprintf("%v: %s: %s", kind, e.File, e.Problem)
	}
	return fmt.Sprintf("%v: %s: %s: %s", kind, e.File, e.Key, e.Problem)
}

// Unwrap lets errors.Is see ErrFormat and the Layout's Kind.
func (e *FormatError) Unwrap() []error {
	if e.Kind == nil {
		return []error{ErrFormat}
	}
	return []error{ErrFormat, e.Kind}
}

// Layout is one kind of bbolt target file: its format value and its own
// buckets. The zero Layout is not usable: Format is required.
type Layout struct {
	// Format is the value of meta/format this kind of file holds: it names
	// the kind and its layout version, so that a file of another kind (or
	// version) is refused. Distinct kinds must use distinct values.
	Format []byte
	// Buckets are the target's data buckets: created with the State's on a
	// new file, required on an existing one.
	Buckets [][]byte
	// Kind, when set, is wrapped by this layout's FormatErrors besides
	// ErrFormat (the target's own sentinel, such as shard.ErrCorrupt).
	Kind error
}

// Options are the bbolt options every bbolt target opens with. NoSync
// stays false: bbolt fsyncs every commit, which is what makes an ack
// durable. NoFreelistSync (as etcd does) saves writing the freelist pages
// on every commit, about a third of the commit time on the reference
// disk; bbolt rebuilds the freelist by a scan at open.
func Options(lockWait time.Duration) *bbolt.Options {
	return &bbolt.Options{Timeout: lockWait, NoSync: false, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}

// Open opens (or creates) the file at path with Options(lockWait),
// creates the buckets of a new file (Init) and loads its State. A file
// that is not of l is refused with a *FormatError and left as it was.
// Every error names the file, so callers return it as it is.
func (l Layout) Open(path string, lockWait time.Duration) (*bbolt.DB, target.State, error) {
	db, err := bbolt.Open(path, 0o600, Options(lockWait))
	if err != nil {
		return nil, target.State{}, l.openError(path, err)
	}
	var st target.State
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := l.Init(tx); err != nil {
			return err
		}
		st, err = l.Load(tx)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, target.State{}, nameFile(path, err)
	}
	return db, st, nil
}

// OpenReadOnly opens the file at path read-only (it must not be open
// elsewhere in this process) and checks its layout. For reading a closed
// file: tests and inspection tools.
func (l Layout) OpenReadOnly(path string, lockWait time.Duration) (*bbolt.DB, error) {
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true, Timeout: lockWait})
	if err != nil {
		return nil, l.openError(path, err)
	}
	if err := db.View(l.Check); err != nil {
		_ = db.Close()
		return nil, nameFile(path, err)
	}
	return db, nil
}

// openError makes bbolt's refusals of a file that is no bbolt database a
// *FormatError; other errors (permissions, the lock) only name the file.
func (l Layout) openError(path string, err error) error {
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
		return &FormatError{File: path, Problem: "not a bbolt file: " + err.Error(), Kind: l.Kind}
	}
	return fmt.Errorf("boltstate: open %s: %w", path, err)
}

// nameFile adds the file's path to an error that is not a *FormatError
// (which names it already).
func nameFile(path string, err error) error {
	if _, ok := errors.AsType[*FormatError](err); ok {
		return err
	}
	return fmt.Errorf("boltstate: %s: %w", path, err)
}

// Init creates the buckets and the format of a new (empty) file and
// checks an existing one (Check). A file with buckets but no meta bucket
// is another application's and is refused, unchanged.
func (l Layout) Init(tx *bbolt.Tx) error {
	if len(l.Format) == 0 {
		panic("boltstate: Layout.Format is empty")
	}
	if tx.Bucket(BucketMeta) != nil {
		return l.Check(tx)
	}
	empty := true
	if err := tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil }); err != nil {
		return err
	}
	if !empty {
		return l.formatError(tx, string(BucketMeta), "missing, in a file with other buckets")
	}
	for _, b := range append([][]byte{BucketMeta, BucketOffsets}, l.Buckets...) {
		if _, err := tx.CreateBucket(b); err != nil {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	return tx.Bucket(BucketMeta).Put(KeyFormat, l.Format)
}

// Check checks that the file holds l's format and buckets.
func (l Layout) Check(tx *bbolt.Tx) error {
	meta := tx.Bucket(BucketMeta)
	if meta == nil {
		return l.formatError(tx, string(BucketMeta), "no such bucket")
	}
	if f := meta.Get(KeyFormat); string(f) != string(l.Format) {
		return l.formatError(tx, key(BucketMeta, KeyFormat),
			fmt.Sprintf("format %s, this build reads %s", describe(f), describe(l.Format)))
	}
	for _, b := range append([][]byte{BucketOffsets}, l.Buckets...) {
		if tx.Bucket(b) == nil {
			return l.formatError(tx, string(b), "no such bucket")
		}
	}
	return nil
}

// Load checks the file (Check) and returns its State.
func (l Layout) Load(tx *bbolt.Tx) (target.State, error) {
	st := target.State{Topics: map[string]types.Offset{}}
	if err := l.Check(tx); err != nil {
		return st, err
	}
	meta := tx.Bucket(BucketMeta)
	if err := readU64(l, tx, KeyAppliedLSN, &st.AppliedLSN); err != nil {
		return st, err
	}
	if err := readU64(l, tx, KeyEpoch, &st.Epoch); err != nil {
		return st, err
	}
	for _, f := range []struct {
		key []byte
		dst *string
	}{{KeyLogClusterID, &st.LogClusterID}, {KeyLogIncarnation, &st.LogIncarnation}} {
		v := meta.Get(f.key)
		if len(v) > MaxLogIdentityBytes || !utf8.Valid(v) {
			return st, l.formatError(tx, key(BucketMeta, f.key), fmt.Sprintf("%d bytes, not a log identity", len(v)))
		}
		*f.dst = string(v)
	}
	err := tx.Bucket(BucketOffsets).ForEach(func(k, v []byte) error {
		if len(v) != 8 {
			return l.formatError(tx, key(BucketOffsets, k), fmt.Sprintf("offset of %d bytes", len(v)))
		}
		st.Topics[string(k)] = types.Offset(binary.BigEndian.Uint64(v))
		return nil
	})
	return st, err
}

// Save writes next in tx, writing only what changed since prev, the State
// of the last commit (the value Load or the last committed Save wrote).
// A State going backwards (a lower applied LSN or epoch than prev) is a
// bug of the caller and panics with the numbers. A log identity longer
// than MaxLogIdentityBytes is refused with an error (nothing written).
func Save(tx *bbolt.Tx, prev, next target.State) error {
	if next.AppliedLSN < prev.AppliedLSN || next.Epoch < prev.Epoch {
		panic(fmt.Sprintf("boltstate: %s: state going backwards: lsn %d -> %d, epoch %d -> %d",
			tx.DB().Path(), prev.AppliedLSN, next.AppliedLSN, prev.Epoch, next.Epoch))
	}
	return write(tx, prev, next, false)
}

// write stores next in tx: every part when all is set, else only what
// differs from prev (the applied LSN and epoch always).
func write(tx *bbolt.Tx, prev, next target.State, all bool) error {
	meta := tx.Bucket(BucketMeta)
	if all || next.LogClusterID != prev.LogClusterID || next.LogIncarnation != prev.LogIncarnation {
		if err := putLogIdentity(meta, next.LogClusterID, next.LogIncarnation); err != nil {
			return fmt.Errorf("boltstate: %s: %w", tx.DB().Path(), err)
		}
	}
	if err := meta.Put(KeyAppliedLSN, U64(next.AppliedLSN)); err != nil {
		return err
	}
	if err := meta.Put(KeyEpoch, U64(next.Epoch)); err != nil {
		return err
	}
	offsets := tx.Bucket(BucketOffsets)
	for topic, o := range next.Topics {
		if old, ok := prev.Topics[topic]; ok && old == o && !all {
			continue
		}
		if err := offsets.Put([]byte(topic), U64(o)); err != nil {
			return err
		}
	}
	return nil
}

// putLogIdentity stores the log identity in meta; an empty identity
// removes the keys (none stored: the next Hello's is adopted).
func putLogIdentity(meta *bbolt.Bucket, cluster, incarnation string) error {
	for _, kv := range [][2][]byte{{KeyLogClusterID, []byte(cluster)}, {KeyLogIncarnation, []byte(incarnation)}} {
		if len(kv[1]) > MaxLogIdentityBytes {
			return fmt.Errorf("%s of %d bytes (at most %d)", kv[0], len(kv[1]), MaxLogIdentityBytes)
		}
	}
	for _, kv := range [][2][]byte{{KeyLogClusterID, []byte(cluster)}, {KeyLogIncarnation, []byte(incarnation)}} {
		var err error
		if len(kv[1]) == 0 {
			err = meta.Delete(kv[0])
		} else {
			err = meta.Put(kv[0], kv[1])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// U64 is v as 8 bytes big-endian: keys in this encoding sort by value.
func U64[T ~uint64](v T) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// readU64 reads an 8-byte big-endian value of meta into dst; a missing
// key is 0.
func readU64[T ~uint64](l Layout, tx *bbolt.Tx, k []byte, dst *T) error {
	v := tx.Bucket(BucketMeta).Get(k)
	if v == nil {
		*dst = 0
		return nil
	}
	if len(v) != 8 {
		return l.formatError(tx, key(BucketMeta, k), fmt.Sprintf("%d bytes, not 8", len(v)))
	}
	*dst = T(binary.BigEndian.Uint64(v))
	return nil
}

func (l Layout) formatError(tx *bbolt.Tx, key, problem string) error {
	return &FormatError{File: tx.DB().Path(), Key: key, Problem: problem, Kind: l.Kind}
}

func key(bucket, k []byte) string { return string(bucket) + "/" + string(k) }

// describe shows a format value: text as a quoted string, an 8-byte
// number (the shard's format) as a number, anything else in hex.
func describe(f []byte) string {
	switch {
	case f == nil:
		return "(none)"
	case printable(f):
		return strconv.Quote(string(f))
	case len(f) == 8:
		return strconv.FormatUint(binary.BigEndian.Uint64(f), 10)
	default:
		return fmt.Sprintf("%x", f)
	}
}

// printable reports whether f is UTF-8 text of printable characters.
func printable(f []byte) bool {
	if !utf8.Valid(f) {
		return false
	}
	for _, r := range string(f) {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// OpenError is the error of opening path with bbolt for l: a file that is
// no bbolt database is a *FormatError; other errors name the file. For
// callers that open the file themselves (an offline reset).
func (l Layout) OpenError(path string, err error) error { return l.openError(path, err) }

// Overwrite replaces the State stored in tx with next, whatever was stored
// (going backwards included), and removes the offsets of topics next does
// not hold. Only for an operator's offline reset of a stopped target
// (`logplayer target reset`); a running target saves through Save, which
// refuses to go backwards.
func Overwrite(tx *bbolt.Tx, next target.State) error {
	offsets := tx.Bucket(BucketOffsets)
	var stale [][]byte
	if err := offsets.ForEach(func(k, _ []byte) error {
		if _, ok := next.Topics[string(k)]; !ok {
			stale = append(stale, bytes.Clone(k))
		}
		return nil
	}); err != nil {
		return err
	}
	for _, k := range stale { // not while iterating: bbolt's ForEach forbids it
		if err := offsets.Delete(k); err != nil {
			return err
		}
	}
	return write(tx, target.State{}, next, true)
}
