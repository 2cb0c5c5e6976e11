#!/usr/bin/env bash
# Checks the JSON line that `logplayer dev --demo` and `logplayer demo` end
# with: committed > 0, duplicates == 0, missing == 0, state_mismatches == 0,
# acked_not_in_log == 0, ok == true. The line is compact JSON written by
# Go's encoding/json, so plain pattern matching is exact (no jq needed on a
# fresh machine).
#   scripts/check-demo-json.sh '<json line>'
set -euo pipefail
line=${1:?usage: check-demo-json.sh JSON_LINE}
fail() { echo "demo check FAILED: $1: $line" >&2; exit 1; }
case "$line" in "{"*"}") ;; *) fail "not a JSON object" ;; esac
echo "$line" | grep -Eq '"committed":[1-9][0-9]*' || fail "nothing committed"
echo "$line" | grep -Eq '"duplicates":0[,}]' || fail "duplicates"
echo "$line" | grep -Eq '"missing":0[,}]' || fail "missing messages"
echo "$line" | grep -Eq '"state_mismatches":0[,}]' || fail "shard state differs from the log"
echo "$line" | grep -Eq '"acked_not_in_log":0[,}]' || fail "acknowledged appends missing from the log"
echo "$line" | grep -Eq '"ok":true' || fail "not ok"
echo "demo check OK: $line"
