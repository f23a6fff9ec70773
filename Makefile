# svcnet. `make demo` runs the main job, `make test` runs every test; both install
# what they need first (hack/install-deps.sh), idempotently.
SHELL := /bin/bash
GO    ?= go
PKG   := github.com/svcnet/svcnet
TOOLS := $(CURDIR)/.cache/bin
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X $(PKG)/internal/version.Version=$(VERSION) -X $(PKG)/internal/version.Commit=$(COMMIT)
# go test's own bound for the whole run; CI allows 90 minutes.
TEST_TIMEOUT ?= 40m

.PHONY: all build generate image test-images deps k8s coredns containerd node-tools test test-node conformance unit fuzz lint demo clean bench-sync bench-lab bench-failover bench-dns bench-datapath

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/svcnet ./cmd/svcnet

# svcnet's container image, built without Docker (hack/mkimage, internal/image):
# bin/svcnet static (CGO_ENABLED=0, the ldflags of `build`) at /usr/local/bin/svcnet
# over a distroless-like base, tagged $(IMAGE_REPOSITORY):$(IMAGE_TAG) and
# :latest, written to bin/svcnet-image.tar (an OCI layout that is also a
# docker-archive, as `docker save` writes: `ctr images import`, `docker load`,
# `podman load`). IMAGE_IMPORT=SOCKET also imports it into the
# containerd at SOCKET, namespace k8s.io (the kubelet's), with $(CTR). The
# Dockerfile builds the same image with Docker or another builder.
IMAGE_REPOSITORY ?= ghcr.io/svcnet/svcnet
IMAGE_TAG ?= $(VERSION)
IMAGE_IMPORT ?=
CTR ?= ctr
image:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/svcnet ./cmd/svcnet
	$(GO) run ./hack/mkimage svcnet --binary bin/svcnet --repository $(IMAGE_REPOSITORY) --tag $(IMAGE_TAG) \
	  --out bin/svcnet-image.tar $(if $(IMAGE_IMPORT),--import $(IMAGE_IMPORT) --ctr $(CTR))

# The images the node tier imports besides svcnet's (pause, agnhost, the
# Debian-based e2e test images, kube-proxy, CoreDNS), named as the e2e framework
# expects, into bin/test-images/ (IMAGE_IMPORT as for `image`). As root:
# debootstrap builds their Debian tree once (cached).
test-images:
	$(GO) run ./hack/mkimage test-images --out bin/test-images $(if $(IMAGE_IMPORT),--import $(IMAGE_IMPORT) --ctr $(CTR))

deps:
	@hack/install-deps.sh

# Real kube-apiserver, kube-controller-manager and kube-proxy, built once and cached.
k8s:
	@tools/k8s/build.sh >/dev/null

# CoreDNS built from its Go module (tools/coredns), for the DNS differential test
# and benchmark; cached like the Kubernetes components.
coredns:
	@tools/coredns/build.sh >/dev/null

# containerd, ctr and containerd-shim-runc-v2 built from containerd's Go module
# (tools/containerd), static; cached like the Kubernetes components.
containerd:
	@tools/containerd/build.sh >/dev/null

# What the node tier runs besides svcnet: the control plane, kubelet, kubectl,
# the e2e test binary with the ginkgo CLI, the test images' static binaries
# (agnhost, regression-issue-74839), and containerd. Each build is cached by the
# content hash of its go.mod and go.sum.
NODE_K8S := kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubelet kubectl \
	e2e.test ginkgo agnhost regression-issue-74839
node-tools: containerd
	@tools/k8s/build.sh $(NODE_K8S) >/dev/null

# The eBPF data plane's BPF objects, compiled from bpf/ by bpf2go with clang-14
# and committed, so that `go build` needs no clang (hack/bpf-generate.sh).
generate: deps
	@hack/bpf-generate.sh

# lint also fails when the committed BPF objects are not what bpf/ compiles to.
lint: deps
	@hack/bpf-generate.sh --check
	@unformatted=$$(gofmt -l cmd internal); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags conformance ./test/node
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags conformance ./test/node

# The node tier alone: real kubelets and containerd on nodes made of network
# namespaces (internal/nodecluster, test/node; about a minute).
test-node: deps node-tools
	SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_CONTAINERD_BIN=$$(tools/containerd/build.sh) \
	  $(GO) test -count=1 -timeout 20m ./internal/nodecluster/... ./test/node

# Kubernetes' own sig-network suite as the judge: every [sig-network] spec that
# is not [Disruptive], [Feature:...], [Flaky] or provider-specific, on a fresh
# 3-node cluster with svcnet (deploy/) and on one with upstream kube-proxy
# (nftables) + CoreDNS, both on svcnet's CNI; prints each spec's two outcomes,
# then "svcnet: P passed, F failed, S skipped" and the same for
# kube-proxy+coredns, and fails on a difference test/node/conformance/
# differences.md does not list (TestConformance; about an hour). Each pass's
# ginkgo output and reports stay in bin/conformance/.
CONFORMANCE_PROCS ?= 4
conformance: deps node-tools build
	SVCNET_CONFORMANCE_PROCS=$(CONFORMANCE_PROCS) SVCNET_CONFORMANCE_OUT=$(CURDIR)/bin/conformance SVCNET_REQUIRE_ROOT=1 \
	  SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_CONTAINERD_BIN=$$(tools/containerd/build.sh) \
	  $(GO) test -tags conformance -count=1 -timeout 8h -run '^TestConformance$$' -v ./test/node

# Unit tier only: no root, no control plane, seconds.
unit:
	$(GO) test -short -count=1 ./...

# Every tier. Root tests must not skip here: SVCNET_REQUIRE_ROOT=1 turns a skip
# into a failure.
#
# The node tier (test/node: three kubelets, containerd, Pods) runs after the
# other packages, alone: beside it, a 2-core machine is too busy for the lab's
# sub-second failover timings that test/e2e holds svcnet to.
#
# The proxy behaviour suite (test/proxy) runs once per data plane: on the
# default plane with the other packages, then on each of OTHER_PLANES
# (SVCNET_DATA_PLANE); the lab's e2e suite (test/e2e, both control planes)
# on each of E2E_PLANES, which holds each plane to its own way through the
# lab (on userspace, a Service's connection has two legs: to the proxy port,
# then the proxy's own to a pod). On ebpf, test/proxy's traffic comes from the
# test process, outside the proxy's --cgroup: it holds the rules under the
# socket load balancer to every behaviour; internal/dataplane/ebpf's kernel
# tests hold the socket load balancer itself.
OTHER_PLANES ?= iptables userspace ebpf
E2E_PLANES ?= iptables userspace ebpf
test: deps lint k8s coredns node-tools build
	SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_COREDNS_BIN=$$(tools/coredns/build.sh) \
	  SVCNET_CONTAINERD_BIN=$$(tools/containerd/build.sh) \
	  $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/test/node$$')
	for plane in $(OTHER_PLANES); do \
	  SVCNET_DATA_PLANE=$$plane SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_COREDNS_BIN=$$(tools/coredns/build.sh) \
	    $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/proxy || exit 1; \
	done
	for plane in $(E2E_PLANES); do \
	  SVCNET_DATA_PLANE=$$plane SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_COREDNS_BIN=$$(tools/coredns/build.sh) \
	    $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e || exit 1; \
	done
	SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_CONTAINERD_BIN=$$(tools/containerd/build.sh) \
	  $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/node
	$(MAKE) --no-print-directory fuzz

# The DNS query path and the manifest decoder's fast path under
# coverage-guided fuzzing, bounded: FUZZ_TIME per target (go test -fuzz takes
# one target of one package at a time). The seed corpora also run as plain
# tests in `make test` and `make unit`.
FUZZ_TIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzServeDNS$$' -fuzztime $(FUZZ_TIME) ./internal/dns
	$(GO) test -run '^$$' -fuzz '^FuzzAnswer$$' -fuzztime $(FUZZ_TIME) ./internal/dns/zone
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeDoc$$' -fuzztime $(FUZZ_TIME) ./internal/source/file
	$(GO) test -run '^$$' -fuzz '^FuzzSplitStream$$' -fuzztime $(FUZZ_TIME) ./internal/source/file
	$(GO) test -run '^$$' -fuzz '^FuzzReconciler$$' -fuzztime $(FUZZ_TIME) ./internal/controlplane

# Rule-programming benchmark: svcnet proxy vs kube-proxy (nftables mode) at 1k, 10k
# and 30k Services on one real control plane; prints a table with ratios
# (bench/sync; about 30 minutes on 2 cores). The iptables pair (svcnet proxy
# --data-plane iptables vs kube-proxy --proxy-mode iptables) runs with
# SVCNET_BENCH_TOOLS=svcnet-iptables,kube-proxy-iptables SVCNET_BENCH_SIZES=1000,10000;
# the embedded default (svcnet proxy --state on the lab's published manifest,
# cold and restarted) beside svcnet on the API server with
# SVCNET_BENCH_TOOLS=svcnet,svcnet-file,svcnet-file-warm SVCNET_BENCH_SIZES=10000.
bench-sync: deps k8s build
	SVCNET_BENCH=1 SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_BENCH_SVCNET=$(CURDIR)/bin/svcnet \
	  $(GO) test ./bench/sync -run '^TestBenchSync$$' -count=1 -timeout 40m -v

# The embedded default's commands at scale: svcnet lab apply of one Service
# into a file-mode lab holding N Services, lab get svc -A and get services -A
# --state, against kubectl apply and get on kube-apiserver holding the same
# Services (bench/lab; N from SVCNET_BENCH_SIZES, default 2000,10000; about
# 5 minutes). Each get runs with its binary as built, then read from disk as
# an installed one is (its maximum RSS differs by the pages mapped).
bench-lab: deps k8s build
	SVCNET_BENCH=1 SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh kube-apiserver kubectl) SVCNET_BENCH_SVCNET=$(CURDIR)/bin/svcnet \
	  $(GO) test ./bench/lab -run '^TestBenchLab$$' -count=1 -timeout 30m -v

# LoadBalancer failover benchmark: 20 node failures, 20 silent agents and 20
# agent kills (restarted by the lab's supervisor) of the IP's owner in a 3-node
# lab, a client request every 10 ms; prints p50 and max of the time to the first
# success again and the requests lost (bench/failover; about 20 minutes).
bench-failover: deps build
	SVCNET_BENCH=1 SVCNET_REQUIRE_ROOT=1 SVCNET_BENCH_SVCNET=$(CURDIR)/bin/svcnet \
	  $(GO) test ./bench/failover -run '^TestBenchFailover$$' -count=1 -timeout 45m -v

# svcnet dns vs CoreDNS at 10k Services, each pinned to one core; prints
# queries/s, p50/p99 and the ratio (bench/dns; about 3 minutes).
bench-dns: deps k8s coredns build
	SVCNET_BENCH=1 SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_COREDNS_BIN=$$(tools/coredns/build.sh) SVCNET_BENCH_SVCNET=$(CURDIR)/bin/svcnet \
	  $(GO) test ./bench/dns -run '^TestBenchDNS$$' -count=1 -timeout 20m -v

# The data path of svcnet proxy (nftables, iptables and userspace planes) and of
# upstream kube-proxy (nftables and iptables modes), taking turns on one
# kube-control-plane lab, against direct pod traffic at 1, 1000 and 10000
# Services: keep-alive and new-connection rates and connect p50/p99 per path,
# ratios to direct, svcnet >= kube-proxy nftables and svcnet-iptables >=
# kube-proxy iptables as targets (bench/datapath; bounded by 6 minutes a proxy;
# SVCNET_BENCH_COUNTS and SVCNET_BENCH_PROXIES choose the counts and proxies).
bench-datapath: deps k8s build
	SVCNET_BENCH=1 SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_BENCH_SVCNET=$(CURDIR)/bin/svcnet \
	  $(GO) test ./bench/datapath -run '^TestBenchDatapath$$' -count=1 -timeout 45m -v

demo: deps build
	@hack/demo.sh

clean:
	rm -rf bin
