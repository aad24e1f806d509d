# cairn — see README.md. `make run` needs the Go toolchain; `make test`
# also gcc, Python 3 with venv, Node.js with npm, and Rust with cargo (the
# README's prerequisites), and fetches the packages the suites need.

GO        ?= go
BUILD     := build
GOFLAGS   ?=
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: all build bins lib test test-readme bench-install test-python test-node test-rust test-xlang bench-workspace bench-bindings bench-reads bench-open node-deps dist dist-python test-dist dist-node test-dist-node dist-rust test-dist-rust venv test-go test-fuzz-short vet bench bench-store bench-daemon run fuzz clean bench-tracker-sync test-diskuse bench-agent test-xlang-pg bench-pg bench-pg-saver venv-adapters bench-adapters bench-fsyncfloor test-kills bench-daemon-floor test-allocs test-norace bench-think bench-pausefloor bench-hosts bench-resume bench-embedded-floor

all: build

## build: compile every package, the binaries and the shared library into build/
build: bins lib
	$(GO) build $(GOFLAGS) ./...

## bins: build/cairnd and build/cairn
bins:
	@mkdir -p $(BUILD)
	$(GO) build $(GOFLAGS) -o $(BUILD)/cairnd ./cmd/cairnd
	$(GO) build $(GOFLAGS) -o $(BUILD)/cairn ./cmd/cairn

## lib: the C-ABI shared library and its header (build/libcairn.so, build/cairn.h)
lib:
	@mkdir -p $(BUILD)
	$(GO) build $(GOFLAGS) -buildmode=c-shared -o $(BUILD)/libcairn.so ./capi
	cp capi/cairn.h $(BUILD)/cairn.h
	rm -f $(BUILD)/libcairn.h

## dist: every package into dist/: the Python wheel (dist-python), the npm
## package (dist-node) and the Rust crates (dist-rust)
DIST := dist
dist: dist-python dist-node dist-rust

# The Python platform wheel (distribution cairn-sessions, import cairn) with
# libcairn.so, cairnd and the cairn CLI inside; built with the standard
# library (bindings/python/build_wheel.py), its platform tag computed from
# the binaries.
dist-python: bins lib
	rm -f $(DIST)/cairn_sessions-*.whl
	$(PYTHON) bindings/python/build_wheel.py --lib $(BUILD)/libcairn.so --daemon $(BUILD)/cairnd \
		--cli $(BUILD)/cairn --license LICENSE --out $(DIST)

# The npm package cairn-sessions (dist/npm/cairn-sessions-*.tgz) with
# libcairn.so and cairnd for this platform inside, in native/<platform>-<arch>/
# (bindings/node/scripts/pack.js; bindings/node/README.md says why).
dist-node: bins lib
	node bindings/node/scripts/pack.js --lib $(BUILD)/libcairn.so --daemon $(BUILD)/cairnd --license LICENSE \
		--goos $$($(GO) env GOOS) --goarch $$($(GO) env GOARCH) --out $(DIST)/npm

# The npm package, installed with npm into an empty project in a temp dir
# (koffi from the registry), works with no CAIRN_* variables from CommonJS
# and from an ES module: auto-start from its own cairnd, save, kill -9,
# resume (bindings/node/scripts/dist-test.js).
test-dist-node: dist-node
	timeout 600 node bindings/node/scripts/dist-test.js $(DIST)/npm/cairn-sessions-*.tgz

# The Rust crates cairn-sessions-sys and cairn-sessions, packaged into
# dist/cargo (bindings/rust/dist.sh): the .crate files, the same unpacked,
# and dependency.toml, which a dependent appends to its Cargo.toml. The -sys
# crate carries libcairn's Go sources (dependencies vendored) and builds a
# static libcairn and cairnd from them, so a dependent's binary needs no
# libcairn.so at run time.
dist-rust:
	GO=$(GO) bash bindings/rust/dist.sh $(CURDIR)/$(DIST)/cargo

# A new cargo project depending on dist/cargo builds with a clean
# environment, and its binary (env -i, no CAIRN_*) auto-starts the cairnd
# the crate built, saves, is killed -9, resumes (bindings/rust/dist_test.py).
# The cargo build is kept in build/dist-rust-target between runs; cargo
# fetches serde and serde_json from crates.io as for test-rust.
test-dist-rust: dist-rust
	timeout 1200 $(PYTHON) bindings/rust/dist_test.py $(DIST)/cargo --target-dir $(BUILD)/dist-rust-target

## test: every test suite: Go, C (through the Go test of capi), Python (and
## the installed wheel), Node.js and Rust, the installed packages, the README
test: vet test-go test-fuzz-short test-python test-dist test-dist-node test-dist-rust test-node test-rust test-xlang test-readme test-diskuse test-allocs test-norace test-kills test-xlang-pg

PYTHON ?= python3

# The Python binding needs nothing but the standard library; its tests run
# in a project-local venv, build/venv, so `make test` works inside or outside
# an activated venv and never installs into the user's Python. The venv sees
# the system's site-packages (a pytest there is used as is, offline); pip
# installs pytest into it only when none is importable.
VENV    := $(BUILD)/venv
VPYTHON := $(VENV)/bin/python

venv:
	@$(VPYTHON) -c 'import sys' 2>/dev/null || { rm -rf $(VENV) && $(PYTHON) -m venv --system-site-packages $(VENV); }
	@$(VPYTHON) -c 'import pytest' 2>/dev/null || $(VPYTHON) -m pip install --quiet --disable-pip-version-check 'pytest>=7'

# The framework packages the adapters are tested against (cairn.langgraph,
# cairn.agents), at the exact versions in constraints-adapters.txt. The
# stamp makes reruns instant and offline; editing the pins reinstalls.
ADAPTERS_STAMP := $(VENV)/.adapters-installed
venv-adapters: venv $(ADAPTERS_STAMP)
$(ADAPTERS_STAMP): bindings/python/constraints-adapters.txt
	$(VPYTHON) -m pip install --quiet --disable-pip-version-check -r bindings/python/constraints-adapters.txt
	@touch $@

test-python: bins lib venv venv-adapters
	cd bindings/python && CAIRN_DAEMON=$(CURDIR)/$(BUILD)/cairnd $(CURDIR)/$(VPYTHON) -m pytest -q -p no:cacheprovider

# The wheel, installed with pip --no-index into a fresh venv in a temp dir,
# works with no CAIRN_* variables: auto-start from its own cairnd, save,
# kill -9, resume, `cairn ls` from the venv's PATH (bindings/python/dist_test.py).
test-dist: dist-python
	timeout 300 $(PYTHON) bindings/python/dist_test.py $(DIST)/cairn_sessions-*.whl

# Every fenced code block of README.md, extracted from it and run as a
# newcomer would after `make dist`: the install steps, then each program in
# the package it installed (tools/readme_test.py says how each block runs
# and how to mark one not meant to run). CAIRN_README_PARTIAL=1 skips, loudly,
# the blocks whose npm or cargo package dist/ lacks.
test-readme: dist
	timeout 1800 $(PYTHON) tools/readme_test.py

# vet also vets every package for darwin, so the platform split stays
# whole (Linux is the platform cairn is tested on; see README.md). Cross-
# compiling turns cgo off, so that pass skips capi (libcairn, all cgo: its
# files carry `//go:build cgo`); the first pass vets capi on Linux.
vet:
	$(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./...

test-go:
	$(GO) test $(TESTFLAGS) ./...

# A workspace of 100,000 sessions of one message each stays within twice its
# live data plus 64 MiB on disk (st_blocks), zeros ahead included. Without
# -race; 16 writers side by side, as a daemon's clients commit, so it takes
# about a minute.
test-diskuse:
	CAIRN_DISKUSE_SESSIONS=100000 $(GO) test -v -count=1 -timeout 15m -run '^TestDiskUseManySessions$$' ./fsstore/

# Allocation bounds without -race (a session read in pages through cairnd,
# in process and through the C API, an embedded host's calls): under the race detector sync.Pool drops a
# quarter of what it is given back, so those tests skip in test-go.
test-allocs:
	$(GO) test -v -count=1 -timeout 5m -run '^(TestPagedReadAllocations|TestEmbeddedCallAllocations|TestForwardMessagesPageAllocations)$$' ./daemon/ ./capi/

# Tests the race detector slows several times and has little to find in:
# a child killed 200 and 60 times (its commits, not the test's goroutines,
# are what is checked), 256 MiB saved through a daemon built without -race
# (its RSS is what is measured), byte-by-byte mutations of decoders that
# run on one goroutine. Under -race (test-go) they run a fifth of their
# rounds, or skip (TestE2EScale) saying so; here they run whole.
test-norace:
	$(GO) test -v -count=1 -timeout 10m -run '^(TestKillDuringCommits|TestKillDuringGroupCommits|TestE2EScale|TestFastSaveMutations|TestFastCheckpointMutations)$$' ./fsstore/ ./daemon/ ./capi/

# cairnd serving 8 concurrent clients (saves and run checkpoints) is killed
# with SIGKILL 200 times; after each kill every acknowledged commit is there
# (daemon/e2e_kills_test.go; plain `go test` runs 10 rounds).
test-kills:
	CAIRN_KILL_ROUNDS=200 $(GO) test -v -count=1 -timeout 15m -run '^TestE2EManyKills$$' ./daemon/

# A short run of the wire decoder's fuzz target is part of `make test`;
# `make fuzz` runs it for FUZZTIME. The short runs are counted in inputs,
# not seconds: Go 1.26's fuzz coordinator can fail a timed run that ends
# while a worker is mid-input with a bare "context deadline exceeded"
# (golang/go#75804, fixed in Go 1.27), which a count has no deadline for.
# Each new input that widens coverage is minimized, by default for up to a
# minute: FuzzDecodeRequest's first short run spent 45 of its 51 s there.
# The short runs minimize for FUZZSHORTMIN runs of the target instead (a
# failing input too, which is still written to testdata/fuzz).
FUZZTIME ?= 5m
FUZZSHORT ?= 40000x
FUZZSHORTMIN ?= 1000x

test-fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZSHORT) -fuzzminimizetime $(FUZZSHORTMIN) ./protocol/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeCheckpointParams$$' -fuzztime $(FUZZSHORT) -fuzzminimizetime $(FUZZSHORTMIN) ./protocol/
	$(GO) test -run '^$$' -fuzz '^FuzzFastSave$$' -fuzztime $(FUZZSHORT) -fuzzminimizetime $(FUZZSHORTMIN) ./capi/

## fuzz: fuzz the wire decoder for longer
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./protocol/

# The Node.js binding uses koffi, installed from package-lock.json. Its
# tests' SqliteSaver (@langchain/langgraph-checkpoint-sqlite) needs
# better-sqlite3, a native module with no prebuilt binary that can be
# fetched here: npm ci builds it from source (build_from_source: no
# prebuild-install download) against the running node's own headers
# (nodedir: node-gyp downloads none), so only the npm registry is used. It
# needs python3, make and a C++ compiler, and adds about a minute. npm ci
# fails if the build does, and the check after it if the module does not
# load: node-deps never goes on without it.
NODE_PREFIX ?= $(shell dirname "$$(dirname "$$(readlink -f "$$(command -v node)")")")

node-deps:
	@test -f "$(NODE_PREFIX)/include/node/node_api.h" || { echo "node-deps: no Node.js headers in $(NODE_PREFIX)/include/node (better-sqlite3 is built from source against them); set NODE_PREFIX to node's install prefix" >&2; exit 1; }
	cd bindings/node && npm_config_build_from_source=true npm_config_nodedir="$(NODE_PREFIX)" npm ci --no-audit --no-fund --loglevel=error
	cd bindings/node && node -e "const D = require('better-sqlite3'); const db = new D(':memory:'); if (db.prepare('select 1 as x').get().x !== 1) process.exit(1); db.close()" \
		|| { echo "node-deps: better-sqlite3 did not build or does not load (see npm's output above)" >&2; exit 1; }

# npm test runs the binding's own tests (node --test); test:validation runs
# the official @langchain/langgraph-checkpoint-validation suite against
# CairnSaver, embedded and through a daemon, under vitest (the package's
# CLI is broken in 1.1.1).
test-node: bins lib node-deps
	cd bindings/node && CAIRN_DAEMON=$(CURDIR)/$(BUILD)/cairnd npm test
	cd bindings/node && CAIRN_DAEMON=$(CURDIR)/$(BUILD)/cairnd npm run test:validation

# The cross-language scenario: Python saves, exports and is killed; Node.js
# imports into another workspace and resumes the run there; Rust finishes
# the workflow there; outputs compared byte for byte. Then one language
# truncates and another reads the tail (truncate_tail.sh).
test-xlang: bins lib node-deps
	bash bindings/testdata/run_scenario.sh
	bash bindings/testdata/truncate_tail.sh

# The same scenario with every stage's daemon on one PostgreSQL database
# (CAIRN_STORE), from a throwaway server (internal/pgtest/pgserve).
test-xlang-pg: bins lib node-deps
	bash bindings/testdata/run_scenario_pg.sh

# The Rust binding links build/libcairn.so (build.rs); cargo fetches serde
# and serde_json from crates.io as Cargo.lock pins them.
test-rust: bins lib
	cd bindings/rust && CAIRN_DAEMON=$(CURDIR)/$(BUILD)/cairnd cargo test --locked --quiet

## bench: the benchmarks whose figures docs/PERFORMANCE.md records
bench: bench-store bench-daemon bench-workspace bench-bindings bench-reads bench-open bench-install bench-tracker-sync bench-agent bench-resume bench-hosts bench-pg bench-pg-saver bench-adapters bench-fsyncfloor bench-daemoncpu bench-daemon-floor bench-embedded-floor

# Through the installed wheel, in a fresh process with no daemon running:
# cairn.connect() (auto-starting the wheel's cairnd) to the first
# acknowledged save, beside cairnd's own start and `import cairn`, N=10.
bench-install: dist-python
	timeout 600 $(PYTHON) bench/install/connect_bench.py $(DIST)/cairn_sessions-*.whl

# pgstore commit latency and tail read against a raw INSERT + COMMIT floor on
# one real PostgreSQL server, 1 and 32 clients over two cairnd processes.
bench-pg: bins
	timeout 900 $(GO) run ./bench/pg -cairnd build/cairnd

# cairn's save per turn against LangGraph's PostgresSaver on one server,
# 1,000 turns (langgraph-checkpoint-postgres from PyPI, in a build/ venv).
bench-pg-saver: bins lib
	timeout 900 bash bench/pg/saver.sh

bench-store:
	$(GO) run ./bench/storebench

bench-daemon:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 3 ./daemon/

# fsstore.Open of a workspace holding OPEN_MB MiB of agent history, with its
# index checkpoints and with every log walked from the start, same run.
OPEN_MB ?= 1024
bench-open:
	CAIRN_BENCH_OPEN_MB=$(OPEN_MB) $(GO) test -run '^$$' -bench BenchmarkOpen -benchtime 10x ./fsstore/

# No-op and 1 KB save latency from Go, Python, Node.js and Rust, embedded and
# through the daemon, side by side.
bench-bindings: bins lib node-deps
	$(PYTHON) bench/bindings/run.py

# The framework adapters against SQLite in one script: LangGraph
# checkpointers, a chat graph's invoke, Agents SDK sessions
# (bench/adapters/bench.py; figures in bench/adapters/README.md).
bench-adapters: bins lib venv-adapters
	CAIRN_LIBRARY=$(CURDIR)/$(BUILD)/libcairn.so CAIRN_DAEMON=$(CURDIR)/$(BUILD)/cairnd $(VPYTHON) bench/adapters/bench.py

# Issue 13's targeted reads (tail, one artifact, summary, resume with a
# tail, truncate by one) through the Python binding, embedded and through
# cairnd, against Python sqlite3 in the same process, at 100 to 100,000
# messages in a workspace of 20,000 files; the fdatasync floor; and
# cairnd's idle RSS with 2,000 sessions (READS_FLAGS, e.g. --rss-mib 1024).
READS_FLAGS ?=
bench-reads: bins lib
	$(PYTHON) bench/reads/reads_bench.py $(READS_FLAGS)

# Issue 17's agent workload (a turn: 2 messages, usage, a run checkpoint)
# lockstep against Python sqlite3 (WAL, synchronous=FULL) and the fdatasync
# floor; resume, tail, the open of a large workspace (cached under
# build/bench-agent/) and 1, 8, 32 concurrent agents. AGENT_FLAGS=--full
# runs 1,000 and 10,000 turns and a 1 GiB open (see bench/agent/agent_bench.py).
AGENT_FLAGS ?=
bench-agent: bins lib
	$(PYTHON) bench/agent/agent_bench.py $(AGENT_FLAGS)

# resumeRun and resumeSession through Python against SQLite reading the
# same rows, at 100 and 1,000 agent turns (bench/agent/resume.py).
bench-resume: bins lib
	CAIRN_LIBRARY=$(CURDIR)/$(BUILD)/libcairn.so $(PYTHON) bench/agent/resume.py

# The agent workload's turns from Python, Node.js and Rust agent processes
# on one cairnd, each through its binding's own checkpoint connection and
# through libcairn, against Python sqlite3 agents on one shared file, at 1,
# 8 and 32 agents: bench/agent/hosts_bench.py. About a minute and a half.
HOSTS_FLAGS ?= --agents 1,8,32 --agent-turns 500
bench-hosts: bins lib node-deps
	cd bindings/rust && cargo build --locked --release --quiet --example agent_turns
	$(PYTHON) bench/agent/hosts_bench.py --daemon $(CURDIR)/$(BUILD)/cairnd $(HOSTS_FLAGS)

# The agent turn with an agent's pauses between turns (a second apart,
# after four minutes of pause), against SQLite: bench/agent/think_bench.py.
# About seven minutes; not part of `make bench`.
THINK_FLAGS ?=
bench-think: bins lib
	$(PYTHON) bench/agent/think_bench.py --daemon $(BUILD)/cairnd $(THINK_FLAGS)

# Compares the workspace index with Watchman 4.9 from Debian's package,
# installed here when missing (the benchmark says so if it cannot be).
bench-workspace:
	@command -v watchman >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq watchman; } || true
	$(GO) run ./bench/wsbench

## bench-tracker-sync: the tracker's pre-commit Sync, quiet and busy tree,
## fast path against the cookie round trip, in one run
bench-tracker-sync:
	$(GO) test -run '^$$' -bench BenchmarkPreCommitSync -benchtime=2000x -count=3 ./workspace/

# The disk's floor for N agents committing in parallel: N writers each
# appending (or overwriting preallocated zeros) and fdatasyncing a file of
# its own, beside one shared file with group commit (bench/fsyncfloor).
bench-fsyncfloor:
	$(GO) run ./bench/fsyncfloor -n 1,8,32

# What a pause costs the next durable write on this machine: an 8 KiB
# pwrite + fdatasync into synced zeros after gaps of 0 to 1 s, the gap
# slept, then spun (bench/pausefloor). About a minute; not in `make bench`.
bench-pausefloor:
	$(GO) run ./bench/pausefloor
	$(GO) run ./bench/pausefloor -spin -gaps 0,10ms,50ms,100ms

# The floor under the daemon path: the agent turn from N processes against
# SQLite, a minimal C daemon with group commit (bench/agent/daemon_floor.c),
# the same in Go (bench/gofloor), that Go floor taking cairn's CBOR
# requests after a length (gofloor -cbor) and speaking cairn's protocol
# (gofloor -ws), and cairnd, turns/s and CPU per turn
# (bench/agent/daemon_floor.py).
FLOOR_FLAGS ?=
bench-daemon-floor: bins lib $(BUILD)/daemon-floor $(BUILD)/gofloor
	$(PYTHON) bench/agent/daemon_floor.py $(FLOOR_FLAGS)

$(BUILD)/daemon-floor: bench/agent/daemon_floor.c
	@mkdir -p $(BUILD)
	$(CC) -O2 -Wall -Wextra -o $@ $<

$(BUILD)/gofloor: bench/gofloor/main.go bench/internal/zerofile/zerofile.go $(wildcard protocol/*.go api/*.go)
	@mkdir -p $(BUILD)
	$(GO) build -o $@ ./bench/gofloor

# The floor under the embedded path: the agent turn lockstep against
# SQLite through cairn embedded, a Go c-shared library that only writes
# and flushes the params (bench/goembedfloor), the Python floor and the
# bare overwrite (bench/agent/embedded_floor.py).
bench-embedded-floor: lib $(BUILD)/goembedfloor.so
	$(PYTHON) bench/agent/embedded_floor.py --turns 3000 --runs 3 --go-floor $(BUILD)/goembedfloor.so

$(BUILD)/goembedfloor.so: bench/goembedfloor/main.go bench/internal/zerofile/zerofile.go
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -o $@ ./bench/goembedfloor
	rm -f $(BUILD)/goembedfloor.h

## run: start the daemon on the current workspace, in the foreground
run: bins
	exec $(BUILD)/cairnd --workspace "$(CURDIR)"

clean:
	rm -rf $(BUILD)

# cairnd's own CPU per agent turn (checkpoint of ~8 KB) with 1 and 32
# clients, goroutines of one Go process; BINS= compares several cairnd
# binaries, interleaved.
.PHONY: bench-daemoncpu
bench-daemoncpu: bins
	go run ./bench/daemoncpu -bins $(or $(BINS),build/cairnd) -agents 1,32 -turns 3200 -rounds 3
