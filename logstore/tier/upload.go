package tier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/minio/minio-go/v7"

	"github.com/logplayer/logplayer/internal/vfs"
	"github.com/logplayer/logplayer/logstore/segment"
)

// Source is the local log the uploader copies (*segment.Log).
type Source interface {
	// Segments lists the segments oldest first, the active one last.
	Segments() []segment.SegmentInfo
	// Dir is the directory of the segment files; FS its filesystem.
	Dir() string
	FS() vfs.FS
}

var _ Source = (*segment.Log)(nil)

// retryInitial is the first wait after a failed attempt; the waits double
// up to Config.RetryMax.
const retryInitial = 200 * time.Millisecond

// Run is the uploader goroutine: it lists the tier's manifests (retrying
// until the object store answers), then every ScanInterval uploads the
// sealed segments of src not yet in the tier, oldest first. It returns when
// ctx is done.
func (t *Tier) Run(ctx context.Context, src Source) {
	if err := t.retry(ctx, "list manifests", func() error {
		// Until the catalog is loaded every sealed segment is lag:
		// retention keeps them all.
		t.setLag(t.pending(src))
		opCtx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
		defer cancel()
		return t.loadCatalog(opCtx)
	}); err != nil {
		return
	}
	tick := time.NewTicker(t.cfg.ScanInterval)
	defer tick.Stop()
	relist := time.NewTicker(t.cfg.RelistInterval)
	defer relist.Stop()
	for {
		t.scan(ctx, src)
		t.scanSnapshot(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-relist.C:
			opCtx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
			if err := t.loadCatalog(opCtx); err != nil && ctx.Err() == nil {
				t.log.Warn("tier listing failed: trying again at the next", "err", err, "in", t.cfg.RelistInterval)
			}
			cancel()
		}
	}
}

// retry runs op until it succeeds, fails permanently or ctx is done,
// waiting with exponential backoff between attempts.
func (t *Tier) retry(ctx context.Context, what string, op func() error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = retryInitial, t.cfg.RetryMax, 0
	return backoff.RetryNotify(op, backoff.WithContext(b, ctx), func(err error, wait time.Duration) {
		t.stats.uploadErrors.Add(1)
		t.log.Warn("tier "+what+" failed: retrying", "err", err, "wait", wait)
	})
}

// pending returns the sealed, durable segments of src the tier does not
// hold yet, oldest first.
func (t *Tier) pending(src Source) []segment.SegmentInfo {
	var out []segment.SegmentInfo
	for _, s := range src.Segments() {
		if !s.Sealed {
			break
		}
		if s.LastLSN < s.FirstLSN || t.Uploaded(s.FirstLSN, s.LastLSN) {
			continue
		}
		// The sealer writes the index file once the segment is durable,
		// in seal order: without it, this and later segments wait.
		if _, err := src.FS().Stat(filepath.Join(src.Dir(), segment.IndexFileName(s.FirstLSN))); err != nil {
			break
		}
		out = append(out, s)
	}
	return out
}

// scan uploads the pending segments one at a time and keeps the lag
// figures current.
func (t *Tier) scan(ctx context.Context, src Source) {
	todo := t.pending(src)
	for i, s := range todo {
		t.setLag(todo[i:])
		err := t.retry(ctx, "upload", func() error {
			opCtx, cancel := context.WithTimeout(ctx, t.cfg.OpTimeout)
			defer cancel()
			return t.upload(opCtx, src, s)
		})
		if err != nil {
			// ctx done, or the local files are gone (truncation,
			// install): the next scan lists the segments again.
			if ctx.Err() == nil {
				t.log.Warn("tier upload abandoned", "segment", s.Name, "err", err)
			}
			return
		}
	}
	t.setLag(nil)
}

// setLag sets the lag figures to the segments in rest.
func (t *Tier) setLag(rest []segment.SegmentInfo) {
	var b int64
	for _, s := range rest {
		b += s.Bytes
	}
	t.stats.lagSegs.Store(int64(len(rest)))
	t.stats.lagBytes.Store(b)
}

// upload copies one sealed segment and its index to the tier, verifies
// both by reading them back, then writes its manifest (read back too). A
// manifest already there with the same SHA-256 values is adopted.
func (t *Tier) upload(ctx context.Context, src Source, s segment.SegmentInfo) error {
	fsys := src.FS()
	segPath := filepath.Join(src.Dir(), segment.SegmentFileName(s.FirstLSN))
	idxPath := filepath.Join(src.Dir(), segment.IndexFileName(s.FirstLSN))
	sealed, err := segment.OpenSealed(fsys, segPath, idxPath)
	if errors.Is(err, os.ErrNotExist) {
		return backoff.Permanent(err)
	}
	if err != nil {
		return backoff.Permanent(fmt.Errorf("tier: local segment %s: %w", s.Name, err))
	}
	m := &Manifest{FirstLSN: sealed.FirstLSN(), LastLSN: sealed.LastLSN(), Topics: sealed.Topics(), UploadedBy: t.cfg.Node}
	_ = sealed.Close()
	if m.SegBytes, m.SegSHA256, err = hashFile(fsys, segPath); err != nil {
		return backoff.Permanent(err)
	}
	if m.IdxBytes, m.IdxSHA256, err = hashFile(fsys, idxPath); err != nil {
		return backoff.Permanent(err)
	}
	if t.adopt(ctx, m) {
		return nil
	}
	for _, f := range []struct {
		path, key string
		size      int64
		sum       string
	}{{segPath, m.segKey(t.loc.prefix), m.SegBytes, m.SegSHA256}, {idxPath, m.idxKey(t.loc.prefix), m.IdxBytes, m.IdxSHA256}} {
		if err := t.putVerified(ctx, fsys, f.path, f.key, f.size, f.sum); err != nil {
			return err
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return backoff.Permanent(err)
	}
	if err := t.putSmallVerified(ctx, m.metaKey(t.loc.prefix), b); err != nil {
		return err
	}
	t.mu.Lock()
	t.addLocked(m)
	t.mu.Unlock()
	t.stats.uploadedBytes.Add(m.SegBytes + m.IdxBytes)
	t.stats.uploadedSegs.Add(1)
	t.log.Info("tier uploaded segment", "segment", s.Name, "first_lsn", m.FirstLSN, "lsn", m.LastLSN, "bytes", m.SegBytes+m.IdxBytes)
	return nil
}

// adopt adds the manifest already in the tier for m's segment (another
// node's upload, or this node's before a crash) when it has m's checksums.
func (t *Tier) adopt(ctx context.Context, m *Manifest) bool {
	key := m.metaKey(t.loc.prefix)
	b, err := t.getSmall(ctx, key)
	if err != nil {
		return false
	}
	have, err := parseManifest(key, b)
	if err != nil || have.SegSHA256 != m.SegSHA256 || have.IdxSHA256 != m.IdxSHA256 ||
		have.SegBytes != m.SegBytes || have.IdxBytes != m.IdxBytes {
		return false
	}
	t.mu.Lock()
	t.addLocked(have)
	t.mu.Unlock()
	t.log.Info("tier segment already uploaded", "first_lsn", m.FirstLSN, "lsn", m.LastLSN, "by", have.UploadedBy)
	return true
}

// putVerified uploads a local file of the given size and SHA-256 and reads
// it back: a *ChecksumError when the object differs.
func (t *Tier) putVerified(ctx context.Context, fsys vfs.FS, path, key string, size int64, sum string) error {
	if err := t.putFile(ctx, fsys, path, key, size); err != nil {
		return err
	}
	n, got, err := t.hashObject(ctx, key, nil)
	if err != nil {
		return err
	}
	if n != size || got != sum {
		t.stats.checksumFailures.Add(1)
		return &ChecksumError{Key: key, WantBytes: size, GotBytes: n, WantSHA256: sum, GotSHA256: got}
	}
	return nil
}

// putSmallVerified writes a small object (a manifest) and reads it back.
func (t *Tier) putSmallVerified(ctx context.Context, key string, b []byte) error {
	if err := t.putBytes(ctx, key, b); err != nil {
		return err
	}
	back, err := t.getSmall(ctx, key)
	if err != nil {
		return err
	}
	if string(back) != string(b) {
		t.stats.checksumFailures.Add(1)
		return fmt.Errorf("%w: manifest %s read back differs", ErrChecksum, key)
	}
	return nil
}

// putFile uploads a local file (Content-MD5 sent, so the server refuses a
// body damaged on the way).
func (t *Tier) putFile(ctx context.Context, fsys vfs.FS, path, key string, size int64) error {
	f, err := fsys.Open(path)
	if err != nil {
		return backoff.Permanent(fmt.Errorf("tier: %w", err))
	}
	defer f.Close()
	_, err = t.client.PutObject(ctx, t.loc.bucket, key, io.NewSectionReader(f, 0, size), size,
		minio.PutObjectOptions{ContentType: "application/octet-stream", SendContentMd5: true})
	if err != nil {
		return fmt.Errorf("tier: put %s: %w", key, err)
	}
	return nil
}

// hashFile returns the size and SHA-256 of a local file.
func hashFile(fsys vfs.FS, path string) (int64, string, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("tier: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", fmt.Errorf("tier: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return 0, "", fmt.Errorf("tier: read %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
