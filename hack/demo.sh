#!/usr/bin/env bash
# make demo. Until the lab exists (issue: svcnet lab and demo), the demo shows the
# foundation: seed 001's manifests run through svcnet's embedded control plane, and
# what it allocated and built, as kubectl would show it.
set -euo pipefail
cd "$(dirname "$0")/.."
svcnet=bin/svcnet
ex=examples/seed-001
cat <<TXT
svcnet demo (foundation stage)

What the full demo will do: build a 3-node cluster network from network namespaces
(the lab), wire pods with svcnet's CNI plugin, run svcnet proxy on every node, give
my-nginx its LoadBalancer IP 172.26.236.180, and trace a request from an external
client through a NodePort to a pod, as seed 001 does by hand.

What runs today: the embedded control plane over $ex/ (seed 001's my-nginx Service
and its two pods on node2 and node3), printed as kubectl would print it.

TXT
run() { echo "\$ $*"; "$@"; echo; }
run $svcnet version
run $svcnet get nodes --state $ex -o wide
run $svcnet get services --state $ex -o wide
run $svcnet get endpointslices --state $ex
run $svcnet get pods --state $ex -o wide
echo "EXTERNAL-IP stays <pending> until svcnet lb assigns one (seed 001 shows 172.26.236.180)."
