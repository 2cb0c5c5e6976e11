// Package e2e holds the end-to-end tests of LogPlayer with real processes:
// the `logplayer` binary is built once and run as 3 LogStore nodes, a
// LogPlayer and 3 reference shards (shard-N subscribed to topic shard-N) on
// 127.0.0.1, under the demo workload (package demo: each transaction writes
// mutations to 2-3 shards plus an orders and an inventory event, every value
// unique), while the tests inject faults. After the faults stop they check
// docs/DESIGN.md, "Guarantees", from the outside:
//   - every acknowledged Append is in the log exactly once, at the LSN it
//     was acknowledged with, and no transaction is in the log twice (§7.2,
//     §7.5);
//   - every transaction of the log is whole: its events name the same id
//     and it has a slice for exactly the shards its order lists (§7.1);
//     LSNs and per-topic offsets are dense (§7.3);
//   - every shard applied its topic up to the log's head, and its state
//     (Scan over gRPC, then its bbolt file) equals the model built from the
//     log read back (shard.ModelApply via demo.Model); hot keys are
//     overwritten by many transactions with unique values, so a write
//     applied twice out of order, or lost, leaves a wrong value (§7.4);
//   - each shard's durable State: next offset of its topic = messages the
//     log holds for it, applied LSN at the head, epoch = the last
//     LogPlayer's (fencing persisted);
//   - with the events target (`logplayer events`, topics orders and
//     inventory): its bbolt file (demo.ReadEventLog) holds exactly the log's
//     messages of its topics, each once, in LSN order, at its offset, and
//     its durable State is at the head with the last owner's epoch;
//   - no target refused a delivery: target_refusals_total, sampled every
//     250 ms and before each kill, stays zero (a duplicate or a gap would be
//     refused by the SDK's continuity check); the only increases allowed
//     are "superseded" where a partition leaves a stream the LogPlayer gave
//     up on open at the target, and "stale_epoch" while a second LogPlayer
//     fences a paused one;
//   - the last LogPlayer reports no refusal, bogus ack, blocked target or
//     recovery below retention; no child logged a panic (or, with
//     -binary-race, a data race).
//
// Tests:
//   - TestRealProcessesUnderFaults (go test ./e2e/, about 1-2 minutes with
//     a warm build cache): per round, SIGKILL a shard and restart it on its
//     data; SIGSTOP another until the LogPlayer suspends it, then SIGCONT;
//     SIGKILL the LogPlayer and restart it (new epoch); SIGKILL a shard and
//     the LogPlayer, restart the LogPlayer while the shard is down, then the
//     shard; SIGSTOP the LogPlayer, start a second one, SIGCONT the first
//     (a zombie: every target must fence it); SIGKILL the LogStore leader
//     and restart it on its data. One
//     round by default, -long runs 5, -rounds N exactly N; -seed S replays a
//     workload; -binary-race builds the children with the race detector.
//   - TestPlayerGroupUnderFaults (go test ./e2e -run
//     TestPlayerGroupUnderFaults, a few minutes): 3 store nodes, the 3
//     shards, the events target and 3 LogPlayers in one group; per round,
//     in a seeded order, SIGKILL a player, SIGSTOP one past its lease,
//     SIGKILL the LogStore leader; the failover times are printed, and
//     every target's durable epoch must be its last owner's token.
//   - TestSinkUnderFaults, TestSinkPlayerGroupTakeover, TestSQLiteSinkKilled
//     (sink_test.go, sink_group_test.go): `logplayer sink postgres` on a
//     real PostgreSQL (internal/pgtest) under sink SIGKILL, PostgreSQL
//     immediate stop, a cut network and a takeover by a second sink process;
//     two LogPlayers of a group feeding one sink, the owner SIGSTOPped past
//     its lease and resumed; `logplayer sink sqlite` killed three times.
//     After each fault every table must hold exactly the log's messages.
//   - TestDockerPartition (go test -tags docker -run TestDockerPartition
//     ./e2e/, needs a working Docker engine, about 2 minutes): the same
//     system in FROM-scratch containers (deploy/Dockerfile) on a private
//     bridge network created for the test; the LogStore leader is cut off
//     (docker network disconnect) while writes go on on the majority, then
//     healed; a shard is cut off until the LogPlayer suspends it, then
//     healed; the LogPlayer is cut off until it gave up on every target,
//     then healed; a shard container is killed and started again. Containers,
//     volumes, network and image are removed at the end.
//   - TestNemesis (go test ./e2e -run Nemesis, about 2 minutes: seeds 1, 2
//     and one random seed, 25 s of faults each; -seed N -duration D replays
//     or soaks, see the README's "Fault testing"): the same system with a
//     TCP proxy (proxy_test.go) on every Raft link and every
//     LogPlayer-to-shard link and the store nodes' clocks shifted through
//     a file (the binary built with -tags nemesis); a nemesis drawn from
//     the seed applies one fault at a time for a random 0.5-6 s: SIGKILL or
//     SIGSTOP/SIGCONT of a store node or the leader, the leader and another
//     node killed together (quorum lost), SIGKILL or SIGSTOP of the
//     LogPlayer, a shard or the SQL sink (`logplayer sink sqlite` on the
//     orders and inventory topics, a target beside the shards), the leader
//     or any node cut from the other two,
//     a shard cut from the LogPlayer only, the leader's clock jumping up to
//     6 h forward or back. Every Append and range Read is recorded
//     (histRecorder). After the faults: liveness (every shard applies
//     the head within livenessMax), checkLinearizable (HTML
//     visualization and JSON history to -artifact-dir on a violation),
//     ackViolations, targetViolations (each shard's durable state = the log
//     replayed), the SQL sink's tables = the log's orders and inventory
//     messages, log timestamps non-decreasing, and what verify checks.
//     The system runs as in production (and as `logplayer dev`): TLS on
//     every connection, bearer tokens and a policy (the test connects with
//     a token); -nemesis-plaintext runs it without. Every recorded Append
//     has a short deadline (0.25-2 s) and a prober appends without a
//     producer id, so faults that cut calls in flight leave unknown
//     outcomes in the history (settled by the final log; the counts of ok,
//     failed and unknown are printed).
//   - TestNemesisNetns (go test -tags netns ./e2e -run NemesisNetns, as
//     root; the same flags): TestNemesis with real partitions: each store
//     node and the LogPlayer in its own network namespace on one bridge
//     (in a hub namespace), cut with iptables DROP rules inside the cut
//     node's namespace (nemesis_netns_test.go).
//   - TestTieredHistory, TestTieredHistoryNewTarget (go test ./e2e -run
//     TieredHistory, about 1-2 minutes; tier_test.go): one store node with
//     tiered storage (16 KiB segments, 64 KiB retention) and an S3 server
//     (internal/fakes3, gofakes3 on a bbolt file) as its own process on
//     loopback. After retention trimmed the local log, Read from LSN 1 and
//     a TopicReader from offset 0 return exactly what was written; the S3
//     process is killed (retention keeps every segment not uploaded, the
//     upload lag and errors show it), the node is killed -9 and restarted
//     with uploads pending, S3 comes back, and the whole log reads back
//     again. The second test starts a LogPlayer with a new events target
//     after retention trimmed the log: the target's file ends up holding
//     every message of its topic from offset 0, read through the tier.
//   - TestTargetBootstrapShard, TestTargetBootstrapSQLite (go test ./e2e
//     -run TestTargetBootstrap, about 30 s each on a loaded machine;
//     bootstrap_test.go, issue #29): one store node whose retention trims
//     16 KiB segments, a LogPlayer group member, and two shards (or SQLite
//     sinks) registered with `logplayer target add`; the one registered
//     after the trim is refused below retention, `logplayer target clone`
//     seeds it from its sibling, and both end holding exactly the log's
//     content.
//
// Goroutines (test code): one waiter per child process (reaps it, closes
// its done channel); the workload's producers (demo.Run) and one
// demo.WatchApplied per shard; one refusal sampler per test; in
// TestNemesis, two readers, and per proxy one accept loop plus, per
// connection, a dialer and two copiers (all closed at cleanup). All end
// before the test does.
package e2e
