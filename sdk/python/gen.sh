#!/bin/sh
# Regenerates the Python stubs of proto/*.proto into logplayer/_pb
# (committed, like the Go ones; OUT=dir writes elsewhere). Needs protoc and grpc_python_plugin
# (Debian: protobuf-compiler protobuf-compiler-grpc).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="${OUT:-$here/logplayer/_pb}"  # OUT: another directory (the freshness test)
plugin=$(command -v grpc_python_plugin)
mkdir -p "$out"
rm -f "$out"/*_pb2*.py
cd "$root/proto"
protoc -I. -I third_party --python_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin" \
	logstore.proto target.proto
# logstore.proto imports google/api/annotations.proto (its REST routes), which
# Debian packages no Python module of: generate the two imported files too,
# flat beside the others as google_api_*_pb2.py (no "google" package of our
# own to shadow protobuf's). Their descriptors keep their names.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
protoc -I third_party --python_out="$tmp" google/api/http.proto google/api/annotations.proto
mv "$tmp/google/api/http_pb2.py" "$out/google_api_http_pb2.py"
mv "$tmp/google/api/annotations_pb2.py" "$out/google_api_annotations_pb2.py"
# protoc writes "import logstore_pb2" and "from google.api import x_pb2": make
# the imports package-relative.
sed -i 's/^import logstore_pb2 as/from . import logstore_pb2 as/; s/^import target_pb2 as/from . import target_pb2 as/' "$out"/*_pb2*.py
sed -i 's/^from google\.api import \([a-z]*\)_pb2 as/from . import google_api_\1_pb2 as/' "$out"/*_pb2*.py
touch "$out/__init__.py"
