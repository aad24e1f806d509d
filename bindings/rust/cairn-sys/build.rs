//! Builds or finds libcairn and tells rustc how to link it.
//!
//! Two ways, chosen in this order:
//!
//! 1. `CAIRN_LIB_DIR` set: link the shared `libcairn.so` in that directory
//!    (with an rpath to it).
//! 2. The crate holds the Go sources of libcairn (`go/go.mod`, as the
//!    packaged crate does; `make dist-rust` puts them there): build a static
//!    `libcairn.a` with `go build -buildmode=c-archive` and link it into the
//!    dependent's binary, and build `cairnd` beside it. Both land in
//!    `OUT_DIR`; the Go build reads the crate's sources and writes nothing
//!    into them. `cairnd`'s absolute path is compiled into this crate as
//!    `DAEMON`, the daemon a connection starts when the caller names none
//!    and `CAIRN_DAEMON` is unset. This needs the Go toolchain (`go` on
//!    `PATH`, or `$GO`) and a C compiler for cgo; the Go dependencies are
//!    vendored in `go/vendor/`, so no network is needed.
//! 3. Otherwise (a checkout of the repository): link the shared
//!    `libcairn.so` in the repository's `build/` directory (three levels
//!    above this crate), where `make lib` writes it.
//!
//! A shared library's directory is published to dependents as
//! `DEP_CAIRN_LIB_DIR` (this crate `links = "cairn"`): a rustc-link-arg
//! reaches only this package's own targets, so the safe crate's build
//! script reads it to embed the same rpath in its tests and examples.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=CAIRN_LIB_DIR");
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let go_src = manifest.join("go");
    match env::var_os("CAIRN_LIB_DIR") {
        Some(d) if !d.is_empty() => link_shared(PathBuf::from(d)),
        _ if go_src.join("go.mod").is_file() => build_static(&go_src),
        _ => link_shared(manifest.join("../../../build")),
    }
}

/// Links the shared libcairn in dir and records an rpath to it.
fn link_shared(dir: PathBuf) {
    // An empty value overrides one the environment of rustc may hold, so
    // DAEMON is None whenever no cairnd was built here.
    println!("cargo::rustc-env=CAIRN_SYS_BUILT_DAEMON=");
    let dir = dir.canonicalize().unwrap_or(dir);
    let lib = dir.join(if cfg!(target_os = "macos") {
        "libcairn.dylib"
    } else {
        "libcairn.so"
    });
    if !lib.exists() {
        println!(
            "cargo::warning=libcairn not found at {}: run `make lib` in the repository root or set CAIRN_LIB_DIR",
            lib.display()
        );
    }
    println!("cargo::rerun-if-changed={}", lib.display());
    println!("cargo::rustc-link-search=native={}", dir.display());
    println!("cargo::rustc-link-lib=dylib=cairn");
    // This crate's own tests find the library without LD_LIBRARY_PATH.
    println!("cargo::rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo::metadata=lib_dir={}", dir.display());
}

/// Builds libcairn.a and cairnd from the Go module in src into OUT_DIR and
/// links the archive statically.
fn build_static(src: &Path) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo::rerun-if-changed={}", src.display());
    for var in [
        "GO",
        "CC",
        "CGO_CFLAGS",
        "CGO_LDFLAGS",
        "GOFLAGS",
        "GOTOOLCHAIN",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let go = env::var_os("GO")
        .filter(|g| !g.is_empty())
        .unwrap_or_else(|| "go".into());
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let goos = match target_os.as_str() {
        "macos" => "darwin",
        other => other,
    };
    let goarch = match target_arch.as_str() {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        "powerpc64le" => "ppc64le",
        other => other,
    };
    let daemon = out.join("cairnd");
    let builds: [(&str, Vec<String>); 2] = [
        (
            "libcairn.a",
            vec![
                "-buildmode=c-archive".into(),
                "-o".into(),
                out.join("libcairn.a").display().to_string(),
                "./capi".into(),
            ],
        ),
        (
            "cairnd",
            vec![
                "-o".into(),
                daemon.display().to_string(),
                "./cmd/cairnd".into(),
            ],
        ),
    ];
    for (what, args) in builds {
        // -mod=vendor: the sources carry their dependencies; -trimpath keeps
        // this machine's paths out of the binaries; -buildvcs=false because
        // the crate is no repository.
        let status = Command::new(&go)
            .current_dir(src)
            .env("CGO_ENABLED", "1")
            .env("GOOS", goos)
            .env("GOARCH", goarch)
            .args(["build", "-mod=vendor", "-trimpath", "-buildvcs=false"])
            .args(&args)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!(
                "building {what}: `{} build` in {} failed ({s}); cairn-sessions-sys builds libcairn and cairnd from the Go sources it carries and needs Go (the version in go/go.mod or newer) and a C compiler for cgo; or set CAIRN_LIB_DIR to a directory holding libcairn.so",
                Path::new(&go).display(),
                src.display()
            ),
            Err(e) => panic!(
                "building {what}: cannot run `{}` ({e}); cairn-sessions-sys builds libcairn and cairnd from the Go sources it carries: install Go (the version in go/go.mod or newer) and put `go` on PATH or name it in $GO, or set CAIRN_LIB_DIR to a directory holding libcairn.so",
                Path::new(&go).display()
            ),
        }
    }
    println!("cargo::rustc-link-search=native={}", out.display());
    println!("cargo::rustc-link-lib=static=cairn");
    // What the Go runtime and the cgo parts of the standard library (net's
    // resolver, os/user) link against; a c-archive leaves them to the
    // final link.
    match target_os.as_str() {
        "macos" => {
            println!("cargo::rustc-link-lib=framework=CoreFoundation");
            println!("cargo::rustc-link-lib=framework=Security");
            println!("cargo::rustc-link-lib=dylib=resolv");
        }
        _ => {
            println!("cargo::rustc-link-lib=dylib=pthread");
            println!("cargo::rustc-link-lib=dylib=dl");
            println!("cargo::rustc-link-lib=dylib=resolv");
        }
    }
    println!(
        "cargo::rustc-env=CAIRN_SYS_BUILT_DAEMON={}",
        daemon.display()
    );
    println!("cargo::metadata=daemon={}", daemon.display());
}
