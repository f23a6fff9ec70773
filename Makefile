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

.PHONY: all build deps k8s test unit lint demo clean bench-sync

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/svcnet ./cmd/svcnet

deps:
	@hack/install-deps.sh

# Real kube-apiserver, kube-controller-manager and kube-proxy, built once and cached.
k8s:
	@tools/k8s/build.sh >/dev/null

lint: deps
	@unformatted=$$(gofmt -l cmd internal); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

# Unit tier only: no root, no control plane, seconds.
unit:
	$(GO) test -short -count=1 ./...

# Every tier. Root tests must not skip here: SVCNET_REQUIRE_ROOT=1 turns a skip
# into a failure.
test: deps lint k8s build
	SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) \
	  $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# Rule-programming benchmark: svcnet proxy vs kube-proxy (nftables mode) at 1k, 10k
# and 30k Services on one real control plane; prints a table with ratios
# (bench/sync; about 30 minutes on 2 cores).
bench-sync: deps k8s build
	SVCNET_BENCH=1 SVCNET_REQUIRE_ROOT=1 SVCNET_K8S_BIN=$$(tools/k8s/build.sh) SVCNET_BENCH_SVCNET=$(CURDIR)/bin/svcnet \
	  $(GO) test ./bench/sync -run '^TestBenchSync$$' -count=1 -timeout 40m -v

demo: deps build
	@hack/demo.sh

clean:
	rm -rf bin
