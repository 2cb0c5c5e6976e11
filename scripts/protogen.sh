#!/usr/bin/env bash
# Regenerates the checked-in Go code from proto/*.proto.
#   scripts/protogen.sh          regenerate in place
#   scripts/protogen.sh --check  fail if the checked-in code is stale
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
MODULE=github.com/logplayer/logplayer

command -v protoc >/dev/null || { echo "protogen: protoc not found (Debian: apt-get install protobuf-compiler)" >&2; exit 1; }
bin="$(go env GOPATH)/bin"
[ -x "$bin/protoc-gen-go" ] && "$bin/protoc-gen-go" --version | grep -q "${PROTOC_GEN_GO_VERSION#v}" ||
  GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
[ -x "$bin/protoc-gen-go-grpc" ] && "$bin/protoc-gen-go-grpc" --version | grep -q "${PROTOC_GEN_GO_GRPC_VERSION#v}" ||
  GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

out=.
if [ "${1:-}" = "--check" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
# proto/third_party: imported protos (google.api.http), not generated here.
PATH="$bin:$PATH" protoc -I proto -I proto/third_party \
  --go_out="$out" --go_opt=module="$MODULE" \
  --go-grpc_out="$out" --go-grpc_opt=module="$MODULE" \
  proto/*.proto
if [ "${1:-}" = "--check" ]; then
  stale=0
  for f in $(cd "$out" && find proto -name '*.go'); do
    cmp -s "$out/$f" "$f" || { echo "protogen: $f is stale: run 'go generate ./proto'" >&2; stale=1; }
  done
  exit $stale
fi
