//! Finds libcairn and tells rustc how to link it.
//!
//! The library directory is `CAIRN_LIB_DIR` when set, else the repository's
//! `build/` directory (three levels above this crate), where `make lib`
//! writes `libcairn.so`. The directory is also published to dependents as
//! `DEP_CAIRN_LIB_DIR` (this crate `links = "cairn"`): a rustc-link-arg
//! reaches only this package's own targets, so the safe crate's build
//! script reads it to embed the same rpath in its tests and examples.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-env-changed=CAIRN_LIB_DIR");
    let dir = match env::var_os("CAIRN_LIB_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            let manifest =
                PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
            manifest.join("../../../build")
        }
    };
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
