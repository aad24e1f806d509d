# cairn — see README.md. Every target works on a fresh machine with the Go
# toolchain; `make test` installs whatever else the suites need.

GO        ?= go
BUILD     := build
GOFLAGS   ?=
TESTFLAGS ?= -race -count=1 -timeout 15m

.PHONY: all build lib test test-go test-fuzz-short vet bench bench-store bench-daemon run fuzz clean

all: build

## build: compile every package and the binaries into build/
build:
	$(GO) build $(GOFLAGS) ./...
	@mkdir -p $(BUILD)
	@for cmd in cairnd cairn; do \
		if [ -d cmd/$$cmd ]; then $(GO) build $(GOFLAGS) -o $(BUILD)/$$cmd ./cmd/$$cmd || exit 1; fi; \
	done

## lib: the C-ABI shared library and its header (build/libcairn.so, build/cairn.h)
lib:
	@mkdir -p $(BUILD)
	$(GO) build $(GOFLAGS) -buildmode=c-shared -o $(BUILD)/libcairn.so ./capi
	cp capi/cairn.h $(BUILD)/cairn.h
	rm -f $(BUILD)/libcairn.h

## test: every test suite
test: vet test-go test-fuzz-short

vet:
	$(GO) vet ./...

test-go:
	$(GO) test $(TESTFLAGS) ./...

# A short run of the wire decoder's fuzz target is part of `make test`;
# `make fuzz` runs it for FUZZTIME.
FUZZTIME ?= 5m

test-fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime 10s ./protocol/

## fuzz: fuzz the wire decoder for longer
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./protocol/

## bench: the benchmarks whose figures docs/PERFORMANCE.md records
bench: bench-store bench-daemon

bench-store:
	$(GO) run ./bench/storebench

bench-daemon:
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 3 ./daemon/

## run: start the daemon on the current workspace, in the foreground
run: build
	@if [ -x $(BUILD)/cairnd ]; then exec $(BUILD)/cairnd --workspace "$(CURDIR)"; \
	else echo "daemon not built yet (cmd/cairnd lands with the daemon issue)"; fi

clean:
	rm -rf $(BUILD)
