package client

// GapRetries is how many answers refused p's sequences as gaps (a test
// hook for the in-flight benchmark).
func GapRetries(p *Producer) int64 { return p.gaps.Load() }
