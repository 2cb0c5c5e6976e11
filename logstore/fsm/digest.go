package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// Request digests (issue #12, defect 7): each remembered producer result
// keeps the SHA-256 of the request it answers, so a retry of that sequence
// with other content is refused (SEQUENCE_REUSED) instead of answered as a
// duplicate of data the producer did not send this time.
//
// The digest is computed over the request's content in a canonical
// encoding of its own, not over proto.Marshal: protobuf's encoding is not
// canonical (field order, unknown fields, packed or not, and Go's map and
// Deterministic options are promises of one implementation and version),
// and a retry re-marshalled by another SDK or version must digest the same.
// What it covers: every slice (topic, then each message's key, value and
// headers (key, value) in order), every condition (topic, group, expected
// next offset) and every offset commit (group, topic, offset), in request
// order. Not the producer fields (id, epoch, sequence: they select the
// row) and not unknown fields. Every string and byte string is length
// prefixed and every list count prefixed (unsigned varints), so field
// boundaries are unambiguous; an empty and an absent bytes field (the same
// on the wire) digest the same. A field added to AppendRequest that is
// content must be added here, and since that changes what apply answers,
// it needs a cluster version (TestRequestDigest holds a golden value).
//
// SHA-256 rather than a 64-bit hash: a collision would silently answer a
// different request as a duplicate (the data lost), and 32 bytes x 5
// results per row is small; it costs about 1 µs for a small request and
// ~1.4 GB/s for large ones (BenchmarkRequestDigest, loaded 2-core box), once per
// producer Append, in apply. crypto/sha256 reads nothing but its input
// (the import boundary allows it).

// digestTag starts every digest's input: a new encoding gets a new tag.
const digestTag = "logplayer/append-digest/1\x00"

// DigestLen is the length of a RequestDigest.
const DigestLen = sha256.Size

// RequestDigest is the digest of req's content (see above).
// The getters make it safe on a request not yet validated (a nil message
// digests as an empty one): the edge computes it before validation.
func RequestDigest(req *logstorepb.AppendRequest) []byte {
	d := digester{h: sha256.New()}
	d.buf = append(d.small[:0], digestTag...)
	d.count(len(req.Slices))
	for _, s := range req.Slices {
		d.str(s.GetTopic())
		d.count(len(s.GetMessages()))
		for _, m := range s.GetMessages() {
			d.bytes(m.GetKey())
			d.bytes(m.GetValue())
			d.count(len(m.GetHeaders()))
			for _, h := range m.GetHeaders() {
				d.str(h.GetKey())
				d.bytes(h.GetValue())
			}
		}
	}
	d.count(len(req.Conditions))
	for _, c := range req.Conditions {
		d.str(c.GetTopic())
		d.str(c.GetGroup())
		d.uint(c.GetExpectedNextOffset())
	}
	d.count(len(req.OffsetCommits))
	for _, oc := range req.OffsetCommits {
		d.str(oc.GetGroup())
		d.str(oc.GetTopic())
		d.uint(oc.GetOffset())
	}
	d.flush()
	return d.h.Sum(nil)
}

// digester writes the canonical encoding into h. Small fields gather in
// buf (a hash Write per field costs more than the hashing); a byte string
// of at least digestDirect bytes goes to h directly, without a copy.
type digester struct {
	h     hash.Hash
	buf   []byte
	small [512]byte
}

const digestDirect = 128

func (d *digester) flush() {
	d.h.Write(d.buf)
	d.buf = d.buf[:0]
}

func (d *digester) uint(v uint64) { d.buf = binary.AppendUvarint(d.buf, v) }
func (d *digester) count(n int)   { d.uint(uint64(n)) }
func (d *digester) bytes(b []byte) {
	d.count(len(b))
	if len(b) >= digestDirect {
		d.flush()
		d.h.Write(b)
		return
	}
	d.buf = append(d.buf, b...)
	if len(d.buf) >= len(d.small)-digestDirect {
		d.flush()
	}
}
func (d *digester) str(s string) {
	d.count(len(s))
	d.buf = append(d.buf, s...)
	if len(d.buf) >= len(d.small)-digestDirect {
		d.flush()
	}
}

// reusedSequence reports whether a retry of a remembered sequence whose
// stored digest is stored carries other content than req. A row without a
// digest (from a snapshot or a legacy row written before the digest
// existed) has nothing to compare with: the retry is taken as a duplicate,
// as before.
func reusedSequence(stored []byte, req *logstorepb.AppendRequest) bool {
	return len(stored) != 0 && string(stored) != string(RequestDigest(req))
}

// validDigest: a stored digest is absent (written before digests) or whole.
func validDigest(d []byte) bool { return len(d) == 0 || len(d) == DigestLen }
