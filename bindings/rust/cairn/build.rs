//! Embeds an rpath to libcairn's directory in this crate's tests and
//! examples, so they run without `LD_LIBRARY_PATH`, when cairn-sys links a
//! shared libcairn: it publishes the directory as `DEP_CAIRN_LIB_DIR`, and
//! its own rustc-link-arg does not reach this package's targets. When it
//! links libcairn statically (the packaged crate) there is no directory
//! and nothing to do.

fn main() {
    println!("cargo::rerun-if-env-changed=DEP_CAIRN_LIB_DIR");
    if let Some(dir) = std::env::var_os("DEP_CAIRN_LIB_DIR") {
        let dir = dir.to_string_lossy();
        println!("cargo::rustc-link-arg-tests=-Wl,-rpath,{dir}");
        println!("cargo::rustc-link-arg-examples=-Wl,-rpath,{dir}");
    }
}
