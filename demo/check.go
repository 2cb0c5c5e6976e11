package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// LogReader reads committed transactions (client.Client.Read: it resumes
// on another node after a failure, without gap or duplicate).
type LogReader interface {
	Read(ctx context.Context, req *logstorepb.ReadRequest, fn func(*logstorepb.ReadResponse) error) error
}

// ReadLog calls fn for every committed transaction with an LSN in
// [from, through], in order, and checks that the LSNs are dense.
func ReadLog(ctx context.Context, r LogReader, from, through uint64, fn func(*logstorepb.Transaction) error) error {
	if through < from {
		return nil
	}
	next := from
	err := r.Read(ctx, &logstorepb.ReadRequest{FromLsn: from, ToLsn: through}, func(resp *logstorepb.ReadResponse) error {
		for _, t := range resp.Transactions {
			if t.Lsn != next {
				return fmt.Errorf("read log: lsn %d, want %d", t.Lsn, next)
			}
			if err := fn(t); err != nil {
				return err
			}
			next++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read log [%d, %d] at lsn %d: %w", from, through, next, err)
	}
	if next != through+1 {
		return fmt.Errorf("read log [%d, %d]: ended at lsn %d", from, through, next-1)
	}
	return nil
}

// scanAttempts bounds ScanAll's retries when the shard applies something
// while it scans.
const scanAttempts = 5

// ScanAll reads a shard's whole state through Scan. When the server
// truncates, it splits the key space by the workload's key shape (KeyKinds,
// then KeyAlphabet), so keys of another shape are only seen while the shard
// is small enough for one Scan (Check then Gets the model's keys it lacks). It returns the applied LSN every scan saw,
// and retries when the shard applied something in between.
func ScanAll(ctx context.Context, c shardpb.ShardClient) (map[string][]byte, uint64, error) {
	for range scanAttempts {
		kv := map[string][]byte{}
		lsns := map[uint64]bool{}
		if err := scanPrefix(ctx, c, "", kv, lsns); err != nil {
			return nil, 0, err
		}
		if len(lsns) == 1 {
			for lsn := range lsns {
				return kv, lsn, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("shard kept applying during %d scans", scanAttempts)
}

func scanPrefix(ctx context.Context, c shardpb.ShardClient, prefix string, kv map[string][]byte, lsns map[uint64]bool) error {
	resp, err := c.Scan(ctx, &shardpb.ScanRequest{Prefix: []byte(prefix)})
	if err != nil {
		return fmt.Errorf("scan %q: %w", prefix, err)
	}
	lsns[resp.AppliedLsn] = true
	if !resp.Truncated {
		for _, it := range resp.Items {
			kv[string(it.Key)] = it.Value
		}
		return nil
	}
	alphabet := KeyAlphabet
	if prefix == "" {
		alphabet = KeyKinds
	}
	for _, b := range []byte(alphabet) {
		if err := scanPrefix(ctx, c, prefix+string(b), kv, lsns); err != nil {
			return err
		}
	}
	return nil
}

// getMissing asks the shard with Get for every key of want that kv lacks
// (ScanAll splits a large shard by the workload's key shape only, so keys of
// another shape, written with `logplayer append --put`, say, need a Get).
func getMissing(ctx context.Context, c shardpb.ShardClient, want, kv map[string][]byte) error {
	for k := range want {
		if _, ok := kv[k]; ok {
			continue
		}
		resp, err := c.Get(ctx, &shardpb.GetRequest{Key: []byte(k)})
		if err != nil {
			return fmt.Errorf("get %q: %w", k, err)
		}
		if resp.Found {
			kv[k] = resp.Value
		}
	}
	return nil
}

// WaitApplied waits until the shard's applied LSN is at least lsn, or ctx
// ends; it returns the last applied LSN seen.
func WaitApplied(ctx context.Context, c shardpb.ShardClient, lsn uint64) (uint64, error) {
	seen := uint64(0)
	for {
		resp, err := c.WaitApplied(ctx, &shardpb.WaitAppliedRequest{Lsn: lsn})
		if err == nil {
			seen = resp.AppliedLsn
			if seen >= lsn {
				return seen, nil
			}
		}
		if ctx.Err() != nil {
			return seen, fmt.Errorf("applied lsn %d, want %d: %w", seen, lsn, ctx.Err())
		}
		if err != nil {
			// A shard restarting or slow to answer: ask again shortly.
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}
}

// LastLSNOf is the LSN of the topic's last message at or below through, or 0.
func (m *Model) LastLSNOf(topic string, through uint64) uint64 {
	offs := m.messages[topic]
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] <= through {
			return offs[i]
		}
	}
	return 0
}

// watchRetry is the pause before asking a shard again after WaitApplied
// failed (shard restarting or unreachable).
const watchRetry = 50 * time.Millisecond

// WatchApplied feeds rec with target's applied LSN each time it advances,
// until ctx ends. Run it in its own goroutine for each shard.
func WatchApplied(ctx context.Context, rec *Recorder, target string, c shardpb.ShardClient) {
	next := uint64(1)
	for ctx.Err() == nil {
		resp, err := c.WaitApplied(ctx, &shardpb.WaitAppliedRequest{Lsn: next})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
			continue
		}
		if resp.AppliedLsn >= next {
			rec.Advanced(target, resp.AppliedLsn)
			next = resp.AppliedLsn + 1
		}
	}
}
