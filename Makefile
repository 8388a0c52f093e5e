# fenced: build, test and lint. `make help` lists the targets.

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit's time: the package version of an untagged build sorts by it.
COMMIT_TIME ?= $(shell git log -1 --format=%cI 2>/dev/null)
BUILDINFO := github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo
# -s -w: stripped. CGO_ENABLED=0: static, no libc dependency.
LDFLAGS   := -s -w -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)

# golangci-lint runs as a pinned Go module: nothing to install.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# How long `make test` fuzzes the configuration parser.
FUZZTIME ?= 20s

.PHONY: all build test lint fmt vet help deb demo

all: build

build: ## Build bin/fenced (static, stripped) with the version stamped in
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/fenced ./cmd/fenced

test: ## Run the tests, then fuzz the configuration parser briefly (the README's test command)
	$(GO) test -timeout 60m ./... && $(GO) test ./configs -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

lint: ## Run golangci-lint (pinned) with .golangci.yml
	$(GOLANGCI_LINT) run ./...

fmt: ## Format all Go code
	$(GO) fmt ./...

vet: ## Run go vet
	$(GO) vet ./...

# Later targets go here as their parts land: testbed (start the local
# Kubernetes and array simulators), e2e, bench, demo.

# The end-to-end suite, chaos runs and benchmarks (tests/e2e, tests/cmd/chaos,
# tests/bench). `go test ./...` runs the representative scenarios and a
# 2-minute chaos run; these run everything.
CHAOS_DURATION ?= 30m
CHAOS_SEED     ?= 0
# The issue's figures: BENCHFLAGS='-steady-nodes 250,500,1000,2000 -clusters 5
# -cluster-nodes 200 -storm-nodes 1000' (tests/bench/main.go lists the flags).
BENCHFLAGS     ?=

.PHONY: e2e chaos bench testbed

testbed: ## Build the test bed's etcd, Kubernetes and kwok binaries into .cache/k8s (no-op when present)
	$(GO) run ./tests/testbed/cmd/build

e2e: ## Run every end-to-end scenario (FENCED_E2E=full), about 30 min
	FENCED_E2E=full $(GO) test -count=1 -timeout 120m -v ./tests/e2e/

chaos: ## Chaos run with invariant checks: CHAOS_DURATION=30m, CHAOS_SEED=N to replay
	$(GO) run ./tests/cmd/chaos -duration $(CHAOS_DURATION) -seed $(CHAOS_SEED)

bench: ## Recovery benchmarks into bench/results.md and bench/results.json (BENCHFLAGS to tune)
	$(GO) run ./tests/bench -out bench $(BENCHFLAGS)

demo: ## Run the demo: test bed, simulated arrays, three replicas; kill a node, show the recovery (DEMO_FLAGS=--keep, --nodes N, ...)
	$(GO) run ./tests/cmd/demo $(DEMO_FLAGS)

deb: build ## Build the Debian package into dist/ (nfpm, pinned in packaging/go.mod)
	cd packaging && $(GO) run . -root .. -binary ../bin/fenced -version '$(VERSION)' -commit-time '$(COMMIT_TIME)' -out ../dist

help: ## List the targets
	@grep -E '^[a-z0-9]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'
