# cairn — see README.md. Every target works on a fresh machine with the Go
# toolchain; `make test` installs whatever else the suites need.

GO        ?= go
BUILD     := build
GOFLAGS   ?=
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: all build test test-go vet bench bench-store run fuzz clean

all: build

## build: compile every package and the binaries into build/
build:
	$(GO) build $(GOFLAGS) ./...
	@mkdir -p $(BUILD)
	@for cmd in cairnd cairn; do \
		if [ -d cmd/$$cmd ]; then $(GO) build $(GOFLAGS) -o $(BUILD)/$$cmd ./cmd/$$cmd || exit 1; fi; \
	done

## test: every test suite
test: vet test-go

vet:
	$(GO) vet ./...

test-go:
	$(GO) test $(TESTFLAGS) ./...

## bench: the benchmarks whose figures docs/PERFORMANCE.md records
bench: bench-store

bench-store:
	$(GO) run ./bench/storebench

## run: start the daemon on the current workspace, in the foreground
run: build
	@if [ -x $(BUILD)/cairnd ]; then exec $(BUILD)/cairnd --workspace "$(CURDIR)"; \
	else echo "daemon not built yet (cmd/cairnd lands with the daemon issue)"; fi

clean:
	rm -rf $(BUILD)
