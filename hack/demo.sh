#!/usr/bin/env bash
# make demo: the scenario of the article "Demystifying Kubernetes Services Packet Path" on a 3-node lab built from network namespaces (svcnet demo).
# Needs root: the lab creates network namespaces (and nothing in the host's own).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "make demo: needs root (it builds network namespaces); run it as root" >&2
  exit 1
fi
exec bin/svcnet demo -f examples/packet-path/my-nginx.yaml
