package tier

import (
	"container/list"

	"github.com/logplayer/logplayer/logstore/segment"
)

// cache is the downloaded segments, at most maxBytes of them unless more
// are being read (an entry in use is never evicted), least recently used
// first out. Plain data: the Tier guards it with mu; the caller closes and
// removes the entries add and release return.
type cache struct {
	maxBytes int64
	bytes    int64
	lru      *list.List // of *cacheEntry, most recently used first
	byName   map[string]*list.Element
}

type cacheEntry struct {
	name             string
	seg              *segment.Sealed
	segPath, idxPath string
	bytes            int64
	refs             int
}

func newCache(maxBytes int64) cache {
	return cache{maxBytes: maxBytes, lru: list.New(), byName: map[string]*list.Element{}}
}

// acquire returns the entry's segment with a reference taken, nil when it
// is not cached.
func (c *cache) acquire(name string) *segment.Sealed {
	el := c.byName[name]
	if el == nil {
		return nil
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	e.refs++
	return e.seg
}

// release drops a reference and returns the entries to evict.
func (c *cache) release(name string) []*cacheEntry {
	if el := c.byName[name]; el != nil {
		el.Value.(*cacheEntry).refs--
	}
	return c.trim()
}

// add caches e (unreferenced) and returns the entries to evict; an entry
// already cached under the name is returned for eviction too.
func (c *cache) add(e *cacheEntry) []*cacheEntry {
	var out []*cacheEntry
	if el := c.byName[e.name]; el != nil {
		// Not possible while downloads are singleflight per name; kept
		// correct anyway: the new copy replaces the old one.
		old := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		c.bytes -= old.bytes
		out = append(out, old)
	}
	c.byName[e.name] = c.lru.PushFront(e)
	c.bytes += e.bytes
	return append(out, c.trim()...)
}

// trim removes unreferenced entries from the back while over maxBytes,
// keeping the most recently used one.
func (c *cache) trim() []*cacheEntry {
	var out []*cacheEntry
	// Never the front: the segment just added (or used) is about to be
	// read, and evicting it would only make its reader download it again.
	for el := c.lru.Back(); el != nil && el != c.lru.Front() && c.bytes > c.maxBytes; {
		prev := el.Prev()
		if e := el.Value.(*cacheEntry); e.refs == 0 {
			c.lru.Remove(el)
			delete(c.byName, e.name)
			c.bytes -= e.bytes
			out = append(out, e)
		}
		el = prev
	}
	return out
}
