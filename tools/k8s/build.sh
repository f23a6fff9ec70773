#!/usr/bin/env bash
# Builds Kubernetes commands from the Go module k8s.io/kubernetes at the version in
# VERSION, into a cache outside the work tree, and prints the directory that holds
# them. A second call with the same go.mod/go.sum builds nothing; concurrent calls
# wait for each other (flock). The cache is $SVCNET_K8S_CACHE (default
# ~/.cache/svcnet/k8s).
#
# Commands:
#   kube-apiserver kube-controller-manager kube-proxy   (the default set)
#   kube-scheduler kubectl kubelet
#   e2e.test                go test -c k8s.io/kubernetes/test/e2e
#   ginkgo                  github.com/onsi/ginkgo/v2/ginkgo at the version k8s pins
#   agnhost                 test/images/agnhost, version from its VERSION file
#   regression-issue-74839  test/images/regression-issue-74839
# As upstream's hack/lib/golang.sh does, the control-plane commands, kube-proxy and
# kubectl are static (CGO_ENABLED=0); so are agnhost and regression-issue-74839, as
# upstream's test/images/image-util.sh builds them, so they run in minimal images.
# kubelet, e2e.test and ginkgo link as go build does by default.
#
# Usage: tools/k8s/build.sh [COMMAND...]   (default: the default set)
set -euo pipefail
cd "$(dirname "$0")"
version=$(tr -d ' \n' < VERSION)
if ! grep -q "^[[:space:]]*\(require \)\?k8s.io/kubernetes ${version}\$" go.mod; then
  echo "tools/k8s: go.mod is not for ${version}: run tools/k8s/gen-gomod.sh and commit" >&2
  exit 1
fi
key=$(cat go.mod go.sum | sha256sum | cut -c1-12)
out="${SVCNET_K8S_CACHE:-$HOME/.cache/svcnet/k8s}/${version}-${key}"
cmds=("$@")
[ ${#cmds[@]} -gt 0 ] || cmds=(kube-apiserver kube-controller-manager kube-proxy)

for c in "${cmds[@]}"; do
  case "$c" in
    kube-apiserver|kube-controller-manager|kube-proxy|kube-scheduler|kubectl|kubelet) ;;
    e2e.test|ginkgo|agnhost|regression-issue-74839) ;;
    *) echo "tools/k8s: unknown command $c (see the list in tools/k8s/build.sh)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

minor=${version#v1.}
minor=${minor%%.*}
# The version stamp of upstream's hack/lib/version.sh (without git state).
vpkg=k8s.io/component-base/version
kversion="-X ${vpkg}.gitVersion=${version} -X ${vpkg}.gitMajor=1 -X ${vpkg}.gitMinor=${minor}"

# image_version DIR: the VERSION file of a test image in the module's tree.
image_version() {
  local dir
  dir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  tr -d ' \n' < "$dir/test/images/$1/VERSION"
}

for c in "${cmds[@]}"; do
  [ -x "$out/$c" ] && continue
  echo "tools/k8s: building $c ${version} (minutes on 2 cores; cached afterwards in $out)" >&2
  case "$c" in
    kube-apiserver|kube-controller-manager|kube-proxy|kube-scheduler|kubectl)
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${kversion}" \
        -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c" ;;
    kubelet)
      go build -trimpath -ldflags "-s -w ${kversion}" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c" ;;
    e2e.test)
      go test -c -trimpath -ldflags "-s -w ${kversion}" -o "$out/$c.tmp" k8s.io/kubernetes/test/e2e ;;
    ginkgo)
      go build -trimpath -ldflags "-s -w" -o "$out/$c.tmp" github.com/onsi/ginkgo/v2/ginkgo ;;
    agnhost)
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=$(image_version agnhost)" \
        -o "$out/$c.tmp" k8s.io/kubernetes/test/images/agnhost ;;
    regression-issue-74839)
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o "$out/$c.tmp" k8s.io/kubernetes/test/images/regression-issue-74839 ;;
  esac
  mv "$out/$c.tmp" "$out/$c"
done
echo "$out"
