#!/usr/bin/env bash
# The nemesis soak (README "Fault testing"): TestNemesis with one random
# seed (printed) and faults for DURATION (default 30m). The log goes to
# ${ARTIFACTS:-/tmp/nemesis-soak}/soak.log with any violation's
# linearizability visualization and history next to it; the summary lines
# are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30m}
dir=${ARTIFACTS:-/tmp/nemesis-soak}
mkdir -p "$dir"
rc=0
go test ./e2e -count=1 -run 'TestNemesis' -seed "${SEED:-0}" -duration "$duration" -timeout 3h \
	-artifact-dir "$dir" -v >"$dir/soak.log" 2>&1 || rc=$?
grep -E 'seeds|faults stopped|liveness:|linearizability:|checked [0-9]+ transactions|operations recorded|replay:|--- (PASS|FAIL)' "$dir/soak.log" || true
exit $rc
