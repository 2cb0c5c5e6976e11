package tier

import (
	"slices"

	"github.com/logplayer/logplayer/types"
)

// catalog is the manifests a node knows, sorted by FirstLSN (then LastLSN).
// Manifests may overlap (nodes whose segments were cut at other LSNs share
// a prefix); records are the same whichever holds them. Plain data: the
// Tier guards it with mu.
type catalog struct {
	ms []*Manifest
}

func (c *catalog) add(m *Manifest) {
	i, found := slices.BinarySearchFunc(c.ms, m, func(a, b *Manifest) int {
		if a.FirstLSN != b.FirstLSN {
			return cmpLSN(a.FirstLSN, b.FirstLSN)
		}
		return cmpLSN(a.LastLSN, b.LastLSN)
	})
	if !found {
		c.ms = slices.Insert(c.ms, i, m)
	}
}

func cmpLSN(a, b types.LSN) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// find returns the manifest holding lsn that reaches furthest.
func (c *catalog) find(lsn types.LSN) *Manifest {
	var best *Manifest
	for _, m := range c.ms {
		if m.FirstLSN > lsn {
			break
		}
		if m.LastLSN >= lsn && (best == nil || m.LastLSN > best.LastLSN) {
			best = m
		}
	}
	return best
}

// covers reports whether the manifests hold every LSN in [first, last].
func (c *catalog) covers(first, last types.LSN) bool {
	for first <= last {
		m := c.find(first)
		if m == nil {
			return false
		}
		first = m.LastLSN + 1
	}
	return true
}

// oldest returns the smallest f such that [f, upTo] is covered; upTo+1
// when upTo is not.
func (c *catalog) oldest(upTo types.LSN) types.LSN {
	f := upTo + 1
	for {
		var next types.LSN
		found := false
		for _, m := range c.ms {
			if m.FirstLSN < f && m.LastLSN+1 >= f && (!found || m.FirstLSN < next) {
				next, found = m.FirstLSN, true
			}
		}
		if !found {
			return f
		}
		f = next
	}
}

// span returns the smallest FirstLSN and the largest LastLSN known (0, 0
// when empty): the tiered range for status, which may have gaps.
func (c *catalog) span() (types.LSN, types.LSN) {
	if len(c.ms) == 0 {
		return 0, 0
	}
	last := types.LSN(0)
	for _, m := range c.ms {
		last = max(last, m.LastLSN)
	}
	return c.ms[0].FirstLSN, last
}
