package tier

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults filled in by Config.validate.
const (
	// DefaultCacheBytes bounds the local copies of downloaded segments:
	// a few default-sized (64 MiB) segments, so a reader catching up
	// sequentially finds the next one cached.
	DefaultCacheBytes = 1 << 30
	// DefaultScanInterval: how often the uploader looks for newly sealed
	// segments. Sealing is rare (one per segment size of appends).
	DefaultScanInterval = time.Second
	// DefaultRetryMax caps the backoff between attempts at one upload
	// while the object store is down.
	DefaultRetryMax = 30 * time.Second
	// DefaultReadTimeout bounds one segment's download for a reader.
	DefaultReadTimeout = 5 * time.Minute
	// DefaultOpTimeout bounds one object operation of the uploader.
	DefaultOpTimeout = 2 * time.Minute
	// DefaultRelistInterval: how often the uploader lists the manifests
	// again, to learn the segments other nodes sharing the prefix
	// uploaded (a node that installs a snapshot from the leader may need
	// them); only new manifests are read.
	DefaultRelistInterval = 5 * time.Minute
)

// ErrConfig: a Config that cannot work.
var ErrConfig = errors.New("tier: bad config")

// Config configures a Tier.
type Config struct {
	// URL is s3://bucket/prefix (the prefix may be empty). Required.
	URL string
	// Endpoint is the S3 endpoint, http://host:port or https://host:port;
	// empty takes AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then AWS S3
	// (s3.amazonaws.com). Credentials come from AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; AWS_REGION is the region.
	Endpoint string
	// CacheDir holds downloaded segments; required. Emptied at New.
	CacheDir       string
	CacheBytes     int64
	ScanInterval   time.Duration
	RelistInterval time.Duration
	RetryMax       time.Duration
	ReadTimeout    time.Duration
	OpTimeout      time.Duration
	// Node names the uploader in manifests (for people reading them).
	Node   string
	Logger *slog.Logger
}

// location is a parsed Config.URL and endpoint.
type location struct {
	bucket, prefix string
	host           string
	secure         bool
}

func (c *Config) validate() (location, error) {
	var loc location
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return loc, fmt.Errorf("%w: tier URL %q: want s3://bucket/prefix", ErrConfig, c.URL)
	}
	loc.bucket = u.Host
	if p := strings.Trim(u.Path, "/"); p != "" {
		loc.prefix = p + "/"
	}
	ep := c.Endpoint
	for _, env := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if ep == "" {
			ep = os.Getenv(env)
		}
	}
	if ep == "" {
		ep = "https://s3.amazonaws.com"
	}
	e, err := url.Parse(ep)
	if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || (e.Path != "" && e.Path != "/") {
		return loc, fmt.Errorf("%w: tier endpoint %q: want http(s)://host[:port]", ErrConfig, ep)
	}
	loc.host, loc.secure = e.Host, e.Scheme == "https"
	if c.CacheDir == "" {
		return loc, fmt.Errorf("%w: CacheDir is required", ErrConfig)
	}
	if c.CacheBytes < 0 || c.ScanInterval < 0 || c.RelistInterval < 0 || c.RetryMax < 0 || c.ReadTimeout < 0 || c.OpTimeout < 0 {
		return loc, fmt.Errorf("%w: negative size or duration", ErrConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	def(&c.ScanInterval, DefaultScanInterval)
	def(&c.RelistInterval, DefaultRelistInterval)
	def(&c.RetryMax, DefaultRetryMax)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.OpTimeout, DefaultOpTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return loc, nil
}
