#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kube-proxy from the Go module
# k8s.io/kubernetes at the version in VERSION, into a cache outside the work tree, and
# prints the directory that holds them. A second call with the same go.mod/go.sum
# builds nothing; concurrent calls wait for each other (flock). The cache is
# $SVCNET_K8S_CACHE (default ~/.cache/svcnet/k8s).
#
# Usage: tools/k8s/build.sh [COMMAND...]   (default: all three)
set -euo pipefail
cd "$(dirname "$0")"
version=$(tr -d ' \n' < VERSION)
if ! grep -q "^require k8s.io/kubernetes ${version}\$" go.mod; then
  echo "tools/k8s: go.mod is not for ${version}: run tools/k8s/gen-gomod.sh and commit" >&2
  exit 1
fi
key=$(cat go.mod go.sum | sha256sum | cut -c1-12)
out="${SVCNET_K8S_CACHE:-$HOME/.cache/svcnet/k8s}/${version}-${key}"
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
cmds=("$@")
[ ${#cmds[@]} -gt 0 ] || cmds=(kube-apiserver kube-controller-manager kube-proxy)
for c in "${cmds[@]}"; do
  if [ ! -x "$out/$c" ]; then
    echo "tools/k8s: building $c ${version} (minutes on 2 cores; cached afterwards in $out)" >&2
    go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=${version}" \
      -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$out/$c.tmp" "$out/$c"
  fi
done
echo "$out"
