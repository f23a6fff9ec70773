#!/usr/bin/env bash
# Installs what svcnet's build, tests and demo need on a fresh Debian machine, and
# nothing that is already there: Debian packages (apt-get, as root) and Go tools
# (into .cache/bin, pinned). Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

# etcd-server: the kube test tier's etcd. nftables, conntrack, iproute2: the kernel
# tiers and the data plane. util-linux: unshare, which gives lab pods their host name.
# librsvg2-bin: rsvg-convert, which renders the tracer's SVG diagrams in its tests.
# iptables: upstream kube-proxy's iptables mode in the data-path benchmark.
# runc: the OCI runtime under the node tier's containerd (built from its module,
# tools/containerd). debootstrap, with debian-archive-keyring to verify what it
# fetches: the root filesystems of the node tier's images.
packages=(etcd-server nftables conntrack iproute2 util-linux librsvg2-bin iptables
  runc debootstrap debian-archive-keyring)
# gcc, libc6-dev: the node tier's pause image, upstream's pause.c linked static.
packages+=(gcc libc6-dev)
# clang-14, llvm-14 (llvm-strip-14), libbpf-dev (bpf/bpf_helpers.h), linux-libc-dev
# (linux/bpf.h): `make generate` compiles bpf/ through bpf2go; `make lint` checks
# that the committed objects are what it produces.
packages+=(clang-14 llvm-14 libbpf-dev linux-libc-dev)
# bash-completion, fish, zsh: svcnet's shell completion is tested in the shells
# it is for (cobra's bash script needs bash-completion, as a user's bash has).
packages+=(bash-completion fish zsh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing Debian packages ${missing[*]}; run as root to install them" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Go tools, pinned, built from the Go module proxy.
bin="$PWD/.cache/bin"
mkdir -p "$bin"
install_tool() { # name module@version
  local name=$1 mod=$2 stamp="$bin/.$1.version"
  if [ -x "$bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$mod" ]; then return; fi
  echo "install-deps: go install $mod" >&2
  GOBIN="$bin" go install "$mod"
  echo "$mod" > "$stamp"
}
install_tool staticcheck honnef.co/go/tools/cmd/staticcheck@v0.8.2
# cnitool drives CNI plugins as a container runtime does (the CNI plugin's tests).
install_tool cnitool github.com/containernetworking/cni/cnitool@v1.3.1
