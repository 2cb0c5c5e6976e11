#!/usr/bin/env bash
# Extra CI checks, run by .ci/run after the test suite:
#   1. the dev demo for 20 s (TLS, tokens and the dev policy on, the default):
#      `logplayer dev --demo 20s` must exit 0 and end
#      with a JSON line showing committed > 0, no duplicates, nothing missing;
#   2. the disk-fault tests, built with -tags failpoints (about 7 s of tests);
#   3. the container check (scripts/docker-e2e.sh) and the multi-host
#      partition test (e2e TestDockerPartition: leader, shard and LogPlayer
#      cut off with docker network disconnect, a shard docker-killed) and the
#      LogPlayer group partition test (e2e TestDockerPlayerGroupPartition: a
#      group member cut from the stores but not from its targets must stop
#      before the new owner starts; about 45 s), when a Docker engine works;
#   4. the nemesis on real partitions (e2e TestNemesisNetns, -tags netns:
#      store nodes and the LogPlayer in network namespaces, iptables DROP;
#      one random seed, 20 s of faults, about 40 s), when run as root with
#      iproute2 and iptables.
# The binary is built once, static, and used for both.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin="$work/logplayer"
CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/logplayer

echo "--- disk-fault tests (-tags failpoints)"
go test -tags failpoints -count=1 -run 'FailureIsSticky|ENOSPC|SlowSealSync|SnapshotDiskFaults|CommitFailureIsNotAcked|RaftLogStoreFault' ./logstore/ ./logstore/segment/ ./shard/

echo "--- TLA+ trace recording (-tags tlatrace; TLC checks the trace by the tla/README.md command)"
go test -tags tlatrace -count=1 -run TestTrace ./dispatcher/

echo "--- logplayer dev --demo 20s"
# Random ports: CI may share the machine with another run.
"$bin" dev --demo 20s --port-base 0 | tee "$work/demo.out"
scripts/check-demo-json.sh "$(tail -n 1 "$work/demo.out")"

if docker info >/dev/null 2>&1; then
  echo "--- container check (docker engine found)"
  scripts/docker-e2e.sh "$bin"
  echo "--- partition tests (containers on private networks; the second: a LogPlayer group member cut from the stores, not from its targets)"
  go test -tags docker -count=1 -timeout 15m -run 'TestDockerPartition$|TestDockerPlayerGroupPartition$' ./e2e/
else
  echo "--- container check skipped: no working Docker engine (docker info failed)"
fi

if [ "$(id -u)" = 0 ] && command -v ip >/dev/null 2>&1 && command -v iptables >/dev/null 2>&1; then
  echo "--- nemesis on network namespaces (-tags netns; one random seed, printed, 20 s of faults)"
  go test -tags netns -count=1 -timeout 10m -run 'TestNemesisNetns$' ./e2e/ -duration 20s
else
  echo "--- netns nemesis skipped: needs root, iproute2 and iptables"
fi
