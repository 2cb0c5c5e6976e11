#!/usr/bin/env bash
# The project's test command (README quick start). Extra flags (e.g. -race)
# are passed to `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -count=1 -timeout 20m "$@" ./...
