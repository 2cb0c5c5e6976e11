package tier

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/logplayer/logplayer/types"
)

// Manifest describes one uploaded segment; its object is written after the
// segment's data objects were verified, and so marks the upload complete.
//
// Invariants (checked by parseManifest): FirstLSN <= LastLSN; sizes
// positive; SHA-256 values 64 hex digits; each topic range first <= end.
type Manifest struct {
	FirstLSN  types.LSN `json:"first_lsn"`
	LastLSN   types.LSN `json:"last_lsn"`
	SegBytes  int64     `json:"seg_bytes"`
	SegSHA256 string    `json:"seg_sha256"`
	IdxBytes  int64     `json:"idx_bytes"`
	IdxSHA256 string    `json:"idx_sha256"`
	// Topics holds each topic's offset range [first, end) in the segment.
	Topics     map[string][2]types.Offset `json:"topics,omitempty"`
	UploadedBy string                     `json:"uploaded_by,omitempty"`
}

// name is the objects' common name, <first>-<last> zero-padded.
func (m *Manifest) name() string { return fmt.Sprintf("%020d-%020d", m.FirstLSN, m.LastLSN) }

func (m *Manifest) segKey(prefix string) string  { return prefix + "segments/" + m.name() + ".seg" }
func (m *Manifest) idxKey(prefix string) string  { return prefix + "segments/" + m.name() + ".idx" }
func (m *Manifest) metaKey(prefix string) string { return prefix + "segments/" + m.name() + ".json" }

func parseManifest(key string, b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %w", ErrChecksum, key, err)
	}
	ok := m.FirstLSN >= 1 && m.FirstLSN <= m.LastLSN && m.SegBytes > 0 && m.IdxBytes > 0 &&
		len(m.SegSHA256) == 64 && len(m.IdxSHA256) == 64 && strings.HasSuffix(key, m.name()+".json")
	for _, r := range m.Topics {
		ok = ok && r[0] <= r[1]
	}
	if !ok {
		return nil, fmt.Errorf("%w: manifest %s is malformed or names another segment", ErrChecksum, key)
	}
	return &m, nil
}
