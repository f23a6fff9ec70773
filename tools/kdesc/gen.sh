#!/bin/sh
# Regenerates internal/describe/testdata from kubectl v0.36.3's describers.
# Usage: tools/kdesc/gen.sh [path to the repository, default this one]
set -eu
repo=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$(dirname "$0")"
{
	cat fixtures_header.txt
	for f in pod_test.go node_test.go; do
		echo
		echo "// From $f."
		awk '/^\/\/ fixtures:begin$/ {on = 1; next} /^\/\/ fixtures:end$/ {on = 0} on' "$repo/internal/describe/$f"
	done
} >fixtures_gen.go
gofmt -w fixtures_gen.go
GOFLAGS=-mod=mod go build -o kdesc .
./kdesc -out "$repo/internal/describe/testdata"
rm -f kdesc
