#!/usr/bin/env bash
# The nemesis soak (README "Fault testing"): TestNemesis with one random
# seed (printed) and faults for DURATION (default 30m). The log goes to
# ${ARTIFACTS:-/tmp/nemesis-soak}/soak.log with any violation's
# linearizability visualization and history next to it; the summary lines
# are printed at the end. NETNS=1 runs TestNemesisNetns instead (-tags
# netns: real partitions in network namespaces, as root); PLAINTEXT=1 runs
# the system without TLS and tokens.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30m}
dir=${ARTIFACTS:-/tmp/nemesis-soak}
mkdir -p "$dir"
test=TestNemesis
flags=()
if [ "${NETNS:-0}" = 1 ]; then
	test=TestNemesisNetns
	flags+=(-tags netns)
fi
extra=()
if [ "${PLAINTEXT:-0}" = 1 ]; then
	extra+=(-nemesis-plaintext)
fi
rc=0
go test "${flags[@]}" ./e2e -count=1 -run "^${test}\$" -seed "${SEED:-0}" -duration "$duration" -timeout 3h \
	-artifact-dir "$dir" "${extra[@]}" -v >"$dir/soak.log" 2>&1 || rc=$?
grep -E 'seeds|network:|faults stopped|liveness:|outcomes:|linearizability:|checked [0-9]+ transactions|operations recorded|replay:|--- (PASS|FAIL)' "$dir/soak.log" || true
exit $rc
