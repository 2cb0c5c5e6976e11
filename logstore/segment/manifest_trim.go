package segment

import "github.com/logplayer/logplayer/types"

// TrimBefore returns m without its sealed segments whose records all lie
// below lsn (each with its index file), and the files it dropped: the
// manifest of the same checkpoint after retention removed those segments
// from the log. The last segment is always kept, so the result still ends
// at m.LastLSN and still validates.
func (m Manifest) TrimBefore(lsn types.LSN) (Manifest, []FileInfo) {
	keepFrom := 0
	// Files come in pairs (segment, index) for sealed segments; the last
	// file is the last segment, which has no index.
	for i := 0; i+1 < len(m.Files)-1; i += 2 {
		seg := m.Files[i]
		if seg.LastLSN >= lsn {
			break
		}
		keepFrom = i + 2
	}
	if keepFrom == 0 {
		return m, nil
	}
	out := m
	out.Files = append([]FileInfo(nil), m.Files[keepFrom:]...)
	out.FirstLSN = out.Files[0].FirstLSN
	return out, append([]FileInfo(nil), m.Files[:keepFrom]...)
}
