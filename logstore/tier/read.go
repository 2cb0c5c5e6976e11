package tier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/segment"
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/types"
)

var _ segment.Below = (*Tier)(nil)

// Oldest implements segment.Below.
func (t *Tier) Oldest(upTo types.LSN) types.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.cat.oldest(upTo)
}

// TopicFirstOffset implements segment.Below: the topic's first offset in
// the oldest manifest of the contiguous run ending at upTo that holds it.
func (t *Tier) TopicFirstOffset(topic string, upTo types.LSN) (types.Offset, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for lsn := t.mu.cat.oldest(upTo); lsn <= upTo; {
		m := t.mu.cat.find(lsn)
		if r, ok := m.Topics[topic]; ok {
			return r[0], true
		}
		lsn = m.LastLSN + 1
	}
	return 0, false
}

// Read implements segment.Below: it serves [from, to] from the tier's
// segments, downloading and verifying each (see the package doc). An
// object that fails its checksum is a *ChecksumError.
func (t *Tier) Read(from, to types.LSN, fn func(*logstorepb.Transaction) (bool, error)) error {
	for from <= to {
		t.mu.Lock()
		m := t.mu.cat.find(from)
		t.mu.Unlock()
		if m == nil {
			return fmt.Errorf("%w: lsn %d is in neither the log nor its tier", segment.ErrBelowRetention, from)
		}
		seg, err := t.open(m)
		if err != nil {
			return err
		}
		t.stats.reads.Add(1)
		stop := false
		err = seg.Read(from, min(to, m.LastLSN), func(txn *logstorepb.Transaction) (bool, error) {
			ok, err := fn(txn)
			stop = !ok || err != nil
			return ok, err
		})
		t.release(m)
		if err != nil || stop {
			return err
		}
		from = m.LastLSN + 1
	}
	return nil
}

// TopicOffsetLSN implements segment.Below.
func (t *Tier) TopicOffsetLSN(topic string, offset types.Offset) (types.LSN, error) {
	var hit *Manifest
	t.mu.Lock()
	for _, m := range t.mu.cat.ms {
		if r, ok := m.Topics[topic]; ok && offset >= r[0] && offset < r[1] {
			hit = m
			break
		}
	}
	t.mu.Unlock()
	if hit == nil {
		return 0, fmt.Errorf("%w: topic %q offset %d is not in the tier", segment.ErrNotFound, topic, offset)
	}
	seg, err := t.open(hit)
	if err != nil {
		return 0, err
	}
	defer t.release(hit)
	t.stats.reads.Add(1)
	return seg.TopicOffsetLSN(topic, offset)
}

// open returns the segment of m from the cache, downloading it first when
// it is not there; the caller releases it.
func (t *Tier) open(m *Manifest) (*segment.Sealed, error) {
	name := m.name()
	for {
		t.mu.Lock()
		seg := t.mu.cache.acquire(name)
		t.mu.Unlock()
		if seg != nil {
			return seg, nil
		}
		_, err, _ := t.fetch.Do(name, func() (any, error) { return nil, t.download(m) })
		if err != nil {
			return nil, err
		}
	}
}

func (t *Tier) release(m *Manifest) {
	t.mu.Lock()
	evict := t.mu.cache.release(m.name())
	t.mu.Unlock()
	t.evict(evict)
}

func (t *Tier) evict(evict []*cacheEntry) {
	for _, e := range evict {
		_ = e.seg.Close()
		_ = os.Remove(e.segPath)
		_ = os.Remove(e.idxPath)
	}
}

// download copies m's two objects into the cache directory, checking each
// against the manifest, opens the copy and adds it to the cache.
func (t *Tier) download(m *Manifest) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.ReadTimeout)
	defer cancel()
	segPath := filepath.Join(t.cfg.CacheDir, m.name()+".seg")
	idxPath := filepath.Join(t.cfg.CacheDir, m.name()+".idx")
	for _, f := range []struct {
		path, key string
		size      int64
		sum       string
	}{{segPath, m.segKey(t.loc.prefix), m.SegBytes, m.SegSHA256}, {idxPath, m.idxKey(t.loc.prefix), m.IdxBytes, m.IdxSHA256}} {
		if err := t.downloadOne(ctx, f.key, f.path, f.size, f.sum); err != nil {
			return err
		}
	}
	seg, err := segment.OpenSealed(vfs.Default, segPath, idxPath)
	if err == nil && (seg.FirstLSN() != m.FirstLSN || seg.LastLSN() != m.LastLSN) {
		_ = seg.Close()
		err = fmt.Errorf("%w: segment %s holds lsn %d..%d", segment.ErrCorrupt, m.name(), seg.FirstLSN(), seg.LastLSN())
	}
	if err != nil {
		_ = os.Remove(segPath)
		_ = os.Remove(idxPath)
		t.stats.checksumFailures.Add(1)
		return fmt.Errorf("%w: %w", ErrChecksum, err)
	}
	t.mu.Lock()
	evict := t.mu.cache.add(&cacheEntry{name: m.name(), seg: seg, segPath: segPath, idxPath: idxPath, bytes: m.SegBytes + m.IdxBytes})
	t.mu.Unlock()
	t.evict(evict)
	return nil
}

// downloadOne copies one object to path, hashing it on the way; a copy
// that differs from the manifest is removed and reported.
func (t *Tier) downloadOne(ctx context.Context, key, path string, size int64, sum string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("tier: %w", err)
	}
	n, got, err := t.hashObject(ctx, key, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && (n != size || got != sum) {
		t.stats.checksumFailures.Add(1)
		err = &ChecksumError{Key: key, WantBytes: size, GotBytes: n, WantSHA256: sum, GotSHA256: got}
		t.log.Error("tier object fails its checksum: not served", "key", key, "err", err)
	}
	if errors.Is(err, errNoObject) {
		t.stats.checksumFailures.Add(1)
		err = &ChecksumError{Key: key, WantBytes: size, GotBytes: 0, WantSHA256: sum, GotSHA256: "(missing)"}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	t.stats.downloaded.Add(n)
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tier: %w", err)
	}
	return nil
}
