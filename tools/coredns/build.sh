#!/usr/bin/env bash
# Builds CoreDNS from the Go module github.com/coredns/coredns at the version in
# VERSION (with its default plugin set, kubernetes included), into a cache outside
# the work tree, and prints the directory that holds the binary `coredns`. A second
# call with the same go.mod/go.sum builds nothing; concurrent calls wait for each
# other (flock). The cache is $SVCNET_COREDNS_CACHE (default ~/.cache/svcnet/coredns).
# A first build takes about 2 minutes on 2 cores. The binary is static
# (CGO_ENABLED=0), as upstream's release builds are, so that it runs in an image
# without a C library (CoreDNS's own image is distroless/static).
#
# Usage: tools/coredns/build.sh
set -euo pipefail
cd "$(dirname "$0")"
version=$(tr -d ' \n' < VERSION)
if ! grep -q "^require github.com/coredns/coredns ${version}\$" go.mod && \
   ! grep -q "^[[:space:]]github.com/coredns/coredns ${version}\( // indirect\)\?\$" go.mod; then
  echo "tools/coredns: go.mod is not for ${version}: run tools/coredns/gen-gomod.sh and commit" >&2
  exit 1
fi
key=$( (cat go.mod go.sum; echo CGO_ENABLED=0) | sha256sum | cut -c1-12)
out="${SVCNET_COREDNS_CACHE:-$HOME/.cache/svcnet/coredns}/${version}-${key}"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ ! -x "$out/coredns" ]; then
  echo "tools/coredns: building coredns ${version} (about 2 minutes on 2 cores; cached afterwards in $out)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${version}" \
    -o "$out/coredns.tmp" github.com/coredns/coredns
  mv "$out/coredns.tmp" "$out/coredns"
fi
echo "$out"
