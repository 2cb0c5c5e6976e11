package main

import (
	"flag"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/logstore"
	"github.com/logplayer/logplayer/logstore/tier"
)

// storeTierFlags are the store's tiered-storage flags (issue #29,
// logstore/tier) and the snapshot threshold that goes with them
// (--segment-bytes and --retention-interval are store.go's).
type storeTierFlags struct {
	url, endpoint     string
	cacheBytes        cli.SizeValue
	snapshotThreshold uint64
}

func (f *storeTierFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "tier-url", "", "tiered storage `s3://bucket/prefix`: sealed segments are uploaded there (and verified) before retention deletes them, and reads below local retention are served from it; credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN, AWS_REGION)")
	fs.StringVar(&f.endpoint, "tier-endpoint", "", "S3 endpoint `URL` for --tier-url, http(s)://host:port (default AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then AWS S3)")
	f.cacheBytes.Bytes = tier.DefaultCacheBytes
	fs.Var(&f.cacheBytes, "tier-cache-bytes", "local copies of segments downloaded from the tier, in `bytes` at most (in DATA_DIR/tier-cache)")
	fs.Uint64Var(&f.snapshotThreshold, "snapshot-threshold", logstore.DefaultSnapshotThreshold, "Raft `entries` since the last snapshot before the next (retention never deletes above the newest snapshot)")
}

// apply sets cfg's tier fields and snapshot threshold.
func (f *storeTierFlags) apply(cfg *logstore.Config) {
	cfg.SnapshotThreshold = f.snapshotThreshold
	if f.url != "" {
		cfg.Tier = &tier.Config{URL: f.url, Endpoint: f.endpoint, CacheBytes: f.cacheBytes.Bytes}
	}
}
