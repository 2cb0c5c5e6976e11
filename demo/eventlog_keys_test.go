package demo

import "github.com/logplayer/logplayer/target/boltstate"

// The names the event log's older tests use for the State's keys and
// bound, which target/boltstate now owns.
var (
	elBucketMeta = boltstate.BucketMeta
	elKeyLogInc  = boltstate.KeyLogIncarnation
)

const maxLogIdentityBytes = boltstate.MaxLogIdentityBytes
