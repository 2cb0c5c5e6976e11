// Package e2e holds the end-to-end tests of LogPlayer with real processes:
// the `logplayer` binary is built once and run as 3 LogStore nodes, a
// LogPlayer and 3 reference shards on 127.0.0.1, under the demo workload
// (package demo), while the tests SIGKILL and restart them in turn. After the
// faults stop they check DESIGN.md §7 from the outside: every acknowledged
// Append is in the log exactly once, every transaction is whole, every
// shard's state equals the model built from the log read back, the shards'
// durable positions cover their topics exactly, and no target ever refused a
// delivery (target_refusals_total is zero).
//
// The package has no non-test code. Tests:
//   - TestRealProcessesUnderFaults (go test ./e2e/, about 1-2 minutes):
//     one round of faults (a shard, the LogPlayer, the LogStore leader);
//     -long runs more rounds, -rounds N exactly N.
//   - TestDockerPartition (go test -tags docker ./e2e/, needs a working
//     Docker engine): the same system in containers on a private network;
//     the LogStore leader is partitioned away and healed, a shard container
//     killed and restarted.
//
// Goroutines (test code): one waiter per child process (reaps it, closes
// its done channel); the workload's producers (demo.Run) and one metrics
// scraper per test that samples every shard's refusal counters until the
// faults end.
package e2e
