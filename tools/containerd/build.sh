#!/usr/bin/env bash
# Builds containerd, ctr and containerd-shim-runc-v2 from the Go module
# github.com/containerd/containerd/v2 at the version in VERSION, into a cache outside
# the work tree, and prints the directory that holds them. A second call with the
# same go.mod/go.sum builds nothing; concurrent calls wait for each other (flock).
# The cache is $SVCNET_CONTAINERD_CACHE (default ~/.cache/svcnet/containerd).
# A first build takes a few minutes on 2 cores, about 70 s with a warm Go cache.
#
# All three are static (CGO_ENABLED=0, with the osusergo netgo static_build tags of
# upstream's STATIC=1 builds). Without cgo the btrfs snapshotter drops out, and the
# no_btrfs no_devmapper no_zfs tags leave out the snapshotters that need their own
# block devices or pools: overlayfs and native remain. The shim gets upstream's
# no_grpc tag, as its Makefile builds it.
#
# Usage: tools/containerd/build.sh
set -euo pipefail
cd "$(dirname "$0")"
version=$(tr -d ' \n' < VERSION)
mod=github.com/containerd/containerd/v2
if ! grep -q "^require ${mod} ${version}\$" go.mod && \
   ! grep -q "^[[:space:]]${mod} ${version}\( // indirect\)\?\$" go.mod; then
  echo "tools/containerd: go.mod is not for ${version}: run tools/containerd/gen-gomod.sh and commit" >&2
  exit 1
fi
key=$(cat go.mod go.sum | sha256sum | cut -c1-12)
out="${SVCNET_CONTAINERD_CACHE:-$HOME/.cache/svcnet/containerd}/${version}-${key}"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
tags="urfave_cli_no_docs osusergo netgo static_build no_btrfs no_devmapper no_zfs"
ldflags="-s -w -X ${mod}/version.Version=${version} -X ${mod}/version.Package=${mod}"
for c in containerd ctr containerd-shim-runc-v2; do
  [ -x "$out/$c" ] && continue
  t=$tags
  [ "$c" = containerd-shim-runc-v2 ] && t="$t no_grpc"
  echo "tools/containerd: building $c ${version} (minutes on 2 cores; cached afterwards in $out)" >&2
  CGO_ENABLED=0 go build -trimpath -tags "$t" -ldflags "$ldflags" -o "$out/$c.tmp" "${mod}/cmd/$c"
  mv "$out/$c.tmp" "$out/$c"
done
echo "$out"
