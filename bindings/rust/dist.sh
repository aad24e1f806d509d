#!/usr/bin/env bash
# Packages the Rust crates into dist/cargo: `make dist-rust`.
#
#   bash bindings/rust/dist.sh [OUT]     (OUT defaults to <repo>/dist/cargo)
#
# The crates are copied to a staging directory outside the repository, laid
# out as in the repository (so the workspace's license-file path holds).
# cairn-sessions-sys gets go/: go.mod, go.sum, the non-test sources of
# every package of this module that libcairn (./capi) and cairnd
# (./cmd/cairnd) import, the files they embed, and vendor/ (`go mod vendor`, which reads the
# module cache or the Go proxy now, so building the crate later needs no
# network). `cargo package --no-verify` then writes both .crate files.
#
# OUT receives:
#   cairn-sessions-sys-<v>.crate, cairn-sessions-<v>.crate  the packages
#   cairn-sessions-sys-<v>/, cairn-sessions-<v>/            the same, unpacked
#   dependency.toml   what a dependent appends to its Cargo.toml: a path
#                     dependency on the unpacked cairn-sessions, and a
#                     [patch.crates-io] entry for cairn-sessions-sys (the
#                     packaged cairn-sessions names it as a registry
#                     dependency, as it would be on crates.io).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/dist/cargo}
go=${GO:-go}
cargo=${CARGO:-cargo}

stage=$(mktemp -d "${TMPDIR:-/tmp}/cairn-cargo-XXXXXX")
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage/bindings"
cp "$root/LICENSE" "$stage/LICENSE"
tar -C "$root/bindings" --exclude=target -cf - rust | tar -C "$stage/bindings" -xf -
ws=$stage/bindings/rust

gosrc=$ws/cairn-sys/go
mkdir -p "$gosrc"
cp "$root/go.mod" "$root/go.sum" "$gosrc/"
(cd "$root" && "$go" list -deps -f '{{if and .Module .Module.Main}}{{.Dir}}{{end}}' ./capi ./cmd/cairnd) >"$stage/pkgs"
while IFS= read -r dir; do
	rel=${dir#"$root"/}
	mkdir -p "$gosrc/$rel"
	for f in "$dir"/*; do
		case $f in
		*_test.go) ;;
		*.go | *.c | *.h | *.s) cp "$f" "$gosrc/$rel/" ;;
		esac
	done
done <"$stage/pkgs"
# Files the packages embed (//go:embed), such as pgstore's migrations.
(cd "$root" && "$go" list -deps -f '{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}' ./capi ./cmd/cairnd) |
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		rel=${f#"$root"/}
		mkdir -p "$gosrc/$(dirname "$rel")"
		cp "$f" "$gosrc/$rel"
	done
(cd "$gosrc" && GOFLAGS=-mod=mod "$go" mod vendor)

# Every Go package the build needs is there: list them from the staged
# module alone, vendored, as the crate's build script will build them.
(cd "$gosrc" && GOFLAGS=-mod=vendor "$go" list -deps ./capi ./cmd/cairnd >/dev/null)

(cd "$ws" && "$cargo" package --workspace --no-verify --quiet --target-dir "$stage/target")

rm -rf "$out"
mkdir -p "$out"
for crate in "$stage"/target/package/*.crate; do
	cp "$crate" "$out/"
	# -m: the files get the time of extraction, not the fixed time cargo
	# package records, so a dependent's cargo sees a new package as changed.
	tar -C "$out" -xzmf "$crate"
done

sys=$(cd "$out" && ls -d cairn-sessions-sys-*/ | head -n1)
safe=$(cd "$out" && ls -d cairn-sessions-[0-9]*/ | head -n1)
out_abs=$(cd "$out" && pwd)
# Dotted tables, not a [dependencies] header: `cargo new` leaves an empty
# [dependencies] at the end of Cargo.toml, and a second one is an error.
cat >"$out/dependency.toml" <<EOF

# cairn (Rust): the packaged crates in $out_abs
[dependencies.cairn-sessions]
path = "$out_abs/${safe%/}"

[patch.crates-io.cairn-sessions-sys]
path = "$out_abs/${sys%/}"
EOF
ls "$out"
