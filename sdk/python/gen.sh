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
protoc -I. --python_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin" \
	logstore.proto target.proto
# protoc writes "import logstore_pb2": make the imports package-relative.
sed -i 's/^import logstore_pb2 as/from . import logstore_pb2 as/; s/^import target_pb2 as/from . import target_pb2 as/' "$out"/*_pb2*.py
touch "$out/__init__.py"
