package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/sync/singleflight"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/types"
)

var (
	// ErrChecksum: an object in the tier does not match its manifest (size
	// or SHA-256), or a manifest is malformed. The object is not served.
	// It wraps apierr.ErrTierChecksum, which the API answers as
	// TIER_CHECKSUM.
	ErrChecksum = fmt.Errorf("tier: object fails its checksum: %w", apierr.ErrTierChecksum)
)

// ChecksumError is a tier object whose bytes differ from its manifest.
type ChecksumError struct {
	Key                   string
	WantBytes, GotBytes   int64
	WantSHA256, GotSHA256 string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("tier: object %s fails its checksum: %d bytes sha256 %s, manifest says %d bytes sha256 %s",
		e.Key, e.GotBytes, e.GotSHA256, e.WantBytes, e.WantSHA256)
}

// Unwrap makes errors.Is(err, ErrChecksum) (and apierr.ErrTierChecksum)
// true.
func (e *ChecksumError) Unwrap() error { return ErrChecksum }

// Stats are the tier's figures for metrics (the caller exports them).
type Stats struct {
	// UploadedBytes and UploadedSegments count this node's verified
	// uploads (segment, index and snapshot bytes) since it started.
	UploadedBytes    int64
	UploadedSegments int64
	// UploadedSnapshots counts this node's verified snapshot uploads
	// (their bytes are in UploadedBytes).
	UploadedSnapshots int64
	// UploadErrors counts failed upload attempts (each retried).
	UploadErrors int64
	// LagSegments and LagBytes are the sealed local segments not yet
	// uploaded, as of the uploader's last scan.
	LagSegments int64
	LagBytes    int64
	// Reads counts segment reads served from the tier, DownloadedBytes
	// the bytes downloaded for them (cache misses).
	Reads           int64
	DownloadedBytes int64
	// ChecksumFailures counts objects that failed their checksum on
	// download (never served) or on read-back after upload.
	ChecksumFailures int64
	// FirstLSN and LastLSN span the manifests known (0, 0: none); Loaded
	// says the catalog was listed.
	FirstLSN, LastLSN types.LSN
	Loaded            bool
}

// Tier is one node's tiered storage. Run its uploader (Run) for uploads;
// Read and TopicOffsetLSN serve reads (segment.Below).
type Tier struct {
	cfg    Config
	loc    location
	client *minio.Client
	log    *slog.Logger
	fetch  singleflight.Group
	snaps  SnapshotSource // SetSnapshots; nil: segments only

	stats struct {
		uploadedBytes, uploadedSegs, uploadErrors atomic.Int64
		lagSegs, lagBytes                         atomic.Int64
		reads, downloaded, checksumFailures       atomic.Int64
		uploadedSnaps                             atomic.Int64
	}

	mu struct {
		sync.Mutex
		loaded bool
		cat    catalog
		// listed holds the manifest keys in cat (listed, uploaded or
		// adopted), so a new listing reads only the others.
		listed map[string]bool
		cache  cache
		// snapshot is the newest snapshot id uploaded (SetSnapshots).
		snapshot string
	}
}

// New checks cfg, empties the cache directory and builds the S3 client. It
// does not contact the object store (Run does).
func New(cfg Config) (*Tier, error) {
	loc, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(cfg.CacheDir); err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	client, err := minio.New(loc.host, &minio.Options{
		Creds:  credentials.NewEnvAWS(),
		Secure: loc.secure,
		Region: os.Getenv("AWS_REGION"),
		// One attempt per call: the uploader's own backoff retries (and
		// counts the failures), a reader gets the error.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	t := &Tier{cfg: cfg, loc: loc, client: client, log: cfg.Logger.With("tier", cfg.URL)}
	t.mu.cache = newCache(cfg.CacheBytes)
	t.mu.listed = map[string]bool{}
	return t, nil
}

// Stats returns the tier's current figures.
func (t *Tier) Stats() Stats {
	st := Stats{
		UploadedBytes: t.stats.uploadedBytes.Load(), UploadedSegments: t.stats.uploadedSegs.Load(),
		UploadedSnapshots: t.stats.uploadedSnaps.Load(),
		UploadErrors:      t.stats.uploadErrors.Load(),
		LagSegments:       t.stats.lagSegs.Load(), LagBytes: t.stats.lagBytes.Load(),
		Reads: t.stats.reads.Load(), DownloadedBytes: t.stats.downloaded.Load(),
		ChecksumFailures: t.stats.checksumFailures.Load(),
	}
	t.mu.Lock()
	st.Loaded = t.mu.loaded
	st.FirstLSN, st.LastLSN = t.mu.cat.span()
	t.mu.Unlock()
	return st
}

// Uploaded reports whether the tier holds every LSN in [first, last]
// (verified uploads): retention may delete a local segment only then.
func (t *Tier) Uploaded(first, last types.LSN) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.loaded && t.mu.cat.covers(first, last)
}

// loadCatalog lists the manifests under the prefix and reads each one not
// in the catalog yet (other nodes' uploads since the last listing).
func (t *Tier) loadCatalog(ctx context.Context) error {
	if err := t.ensureBucket(ctx); err != nil {
		return err
	}
	var ms []*Manifest
	for obj := range t.client.ListObjects(ctx, t.loc.bucket, minio.ListObjectsOptions{Prefix: t.loc.prefix + "segments/", Recursive: true}) {
		if obj.Err != nil {
			return fmt.Errorf("tier: list: %w", obj.Err)
		}
		t.mu.Lock()
		known := t.mu.listed[obj.Key]
		t.mu.Unlock()
		if known || !strings.HasSuffix(obj.Key, ".json") {
			continue
		}
		b, err := t.getSmall(ctx, obj.Key)
		if err != nil {
			return err
		}
		m, err := parseManifest(obj.Key, b)
		if err != nil {
			t.stats.checksumFailures.Add(1)
			t.log.Error("tier manifest ignored", "key", obj.Key, "err", err)
			continue
		}
		ms = append(ms, m)
	}
	t.mu.Lock()
	for _, m := range ms {
		t.addLocked(m)
	}
	first := !t.mu.loaded
	t.mu.loaded = true
	t.mu.Unlock()
	if first || len(ms) > 0 {
		t.log.Info("tier catalog listed", "new_segments", len(ms))
	}
	return nil
}

// addLocked adds m to the catalog. Under mu.
func (t *Tier) addLocked(m *Manifest) {
	t.mu.cat.add(m)
	t.mu.listed[m.metaKey(t.loc.prefix)] = true
}

// ensureBucket creates the bucket when it does not exist.
func (t *Tier) ensureBucket(ctx context.Context) error {
	ok, err := t.client.BucketExists(ctx, t.loc.bucket)
	if err != nil {
		return fmt.Errorf("tier: bucket %s: %w", t.loc.bucket, err)
	}
	if !ok {
		if err := t.client.MakeBucket(ctx, t.loc.bucket, minio.MakeBucketOptions{Region: os.Getenv("AWS_REGION")}); err != nil {
			return fmt.Errorf("tier: make bucket %s: %w", t.loc.bucket, err)
		}
	}
	return nil
}

// maxManifestBytes bounds a manifest read (a segment with very many topics
// still fits).
const maxManifestBytes = 16 << 20

// getSmall reads a whole small object; errNoObject when it does not exist.
func (t *Tier) getSmall(ctx context.Context, key string) ([]byte, error) {
	obj, err := t.client.GetObject(ctx, t.loc.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("tier: get %s: %w", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, maxManifestBytes))
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil, errNoObject
		}
		return nil, fmt.Errorf("tier: get %s: %w", key, err)
	}
	return b, nil
}

var errNoObject = errors.New("tier: no such object")

// hashObject streams an object through SHA-256 into w (nil: discard) and
// returns its size and digest.
func (t *Tier) hashObject(ctx context.Context, key string, w io.Writer) (int64, string, error) {
	obj, err := t.client.GetObject(ctx, t.loc.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, "", fmt.Errorf("tier: get %s: %w", key, err)
	}
	defer obj.Close()
	h := sha256.New()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return 0, "", errNoObject
		}
		return n, "", fmt.Errorf("tier: get %s: %w", key, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// putBytes writes a small object.
func (t *Tier) putBytes(ctx context.Context, key string, b []byte) error {
	_, err := t.client.PutObject(ctx, t.loc.bucket, key, bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json", SendContentMd5: true})
	if err != nil {
		return fmt.Errorf("tier: put %s: %w", key, err)
	}
	return nil
}
