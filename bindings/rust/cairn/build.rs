//! Embeds an rpath to libcairn's directory in this crate's tests and
//! examples, so they run without `LD_LIBRARY_PATH`. cairn-sys links the
//! library and publishes its directory as `DEP_CAIRN_LIB_DIR`; its own
//! rustc-link-arg does not reach this package's targets. A binary that
//! depends on this crate records its own rpath (or sets `LD_LIBRARY_PATH`).

fn main() {
    println!("cargo::rerun-if-env-changed=DEP_CAIRN_LIB_DIR");
    if let Some(dir) = std::env::var_os("DEP_CAIRN_LIB_DIR") {
        let dir = dir.to_string_lossy();
        println!("cargo::rustc-link-arg-tests=-Wl,-rpath,{dir}");
        println!("cargo::rustc-link-arg-examples=-Wl,-rpath,{dir}");
    }
}
