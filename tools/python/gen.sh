#!/usr/bin/env bash
# Generates the Python protobuf code for Protos/ into tools/python/generated/
# (gitignored) with the protoc bundled in grpcio-tools (see requirements.txt),
# so the generated code matches the pinned protobuf runtime.
#   tools/python/gen.sh           uses python3; set PYTHON to use another
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}
out="$here/generated"

"$py" -c 'import grpc_tools.protoc' 2>/dev/null || {
  echo "gen.sh: grpc_tools missing; run: $py -m pip install -r $here/requirements.txt" >&2
  exit 1
}
rm -rf "$out"
mkdir -p "$out"
cd "$repo/Protos"
protos=$(find . -name '*.proto' | sed 's|^\./||' | sort)
# shellcheck disable=SC2086
"$py" -m grpc_tools.protoc -I. --python_out="$out" --pyi_out="$out" $protos
echo "gen.sh: wrote $(find "$out" -name '*_pb2.py' | wc -l) modules to $out"
