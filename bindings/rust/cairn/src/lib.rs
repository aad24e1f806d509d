//! Rust binding of cairn, the store of coding-agent session state.
//!
//! cairn keeps an agent's conversation, runs with loop checkpoints and
//! resumable workflows durably, so the next piece of work finds them again
//! after a crash, a restart or a hand-over. This crate is a thin, safe
//! wrapper over libcairn's C ABI (`capi/cairn.h`): every call goes through
//! `cairn_call` on the calling thread and returns `Result<T, cairn::Error>`,
//! where [`Error`] carries a stable [`ErrorCode`] and a message. (One
//! exception: in daemon mode [`Client::checkpoint`] speaks the wire
//! protocol to cairnd itself when it can send the call exactly as libcairn
//! would, with the same results and errors; `CAIRN_RUST_WIRE=0` turns that
//! off. See the crate's README.)
//!
//! ```no_run
//! use cairn::{Change, Options};
//! use serde_json::json;
//!
//! let client = cairn::connect(Options::new("/path/to/workspace").embedded(true))?;
//! let generation = client.save("s1", &Change::append_messages([json!({"role": "user", "content": "hi"})]), None)?;
//! let resumed = client.resume_session("s1")?;
//! assert_eq!(resumed.generation, generation);
//! # Ok::<(), cairn::Error>(())
//! ```
//!
//! `resume_session` hands over the whole session. A step that needs one
//! part reads only that part, at a cost in proportion to what it returns:
//! [`Client::summary`], [`Client::messages`] (a tail, a range, those since
//! a generation; paged), [`Client::artifact`] and [`Client::artifacts`]
//! (metadata only), [`Client::run`], [`Client::runs`],
//! [`Client::run_events`], and [`Client::resume_session_with`]
//! ([`ResumeOptions`]). A [`Change`] edits as a delta: `truncate_messages`,
//! `delete_artifacts`, `put_artifacts`.
//!
//! [`Client::export_file`] and [`Client::import_file`] move a session
//! through a file, with its runs' loop checkpoints and the workflows it
//! owns ([`Envelope`]), so a run resumes in another workspace.
//!
//! [`Client::verify`] checks every record of every log the store keeps;
//! [`Client::repair`] salvages a damaged one ([`RepairRequest`]). A damaged
//! session stays listed, with [`Summary::state`] saying why it is not
//! served.
//!
//! The raw C ABI is the `cairn-sessions-sys` crate (re-exported as
//! [`sys`]). As packaged (crates.io, `make dist-rust`), it builds libcairn
//! from the Go sources it carries with `go build -buildmode=c-archive` and
//! links it statically, so a binary that depends on this crate runs
//! without `LD_LIBRARY_PATH` or any library beside it; it builds `cairnd`
//! too, and [`connect`] starts that one ([`sys::DAEMON`]) when
//! [`Options::daemon`] is unset and `$CAIRN_DAEMON` is unset. Static
//! linking was chosen because a build script cannot give a dependent's
//! binary an rpath, and a library loaded from a fixed place ties the
//! binary to a file outside it; the price is that building needs the Go
//! toolchain and a C compiler. In the repository (or with
//! `$CAIRN_LIB_DIR`) it links the shared `libcairn.so` of `build/` (or of
//! that directory) instead. See the crate's README.
//!
//! The fork rule: the Go runtime inside libcairn does not survive `fork()`
//! without `exec()`. A client used in a forked child fails with
//! [`ErrorCode::Forked`] instead of hanging.

mod base64;
mod client;
mod error;
mod ffi;
mod run;
mod sha1;
mod types;
mod wire;
mod workflow;

/// The wire path's CBOR encoding of a checkpoint's params (for tests).
#[doc(hidden)]
pub use wire::checkpoint_params as wire_checkpoint_params;

pub use client::{Client, Options, Save, Step, Subscription, WorkflowError, connect};
pub use error::{Error, ErrorCode, Result};
pub use run::{AgentRun, RunOptions, Turn};
pub use types::*;

/// The raw declarations of `cairn.h` this crate wraps.
pub use cairn_sys as sys;

/// The libcairn version, e.g. "0.1.0".
pub fn version() -> &'static str {
    // SAFETY: cairn_version returns a static NUL-terminated string.
    let p = unsafe { ffi::cairn_version() };
    if p.is_null() {
        return "";
    }
    // SAFETY: as above; the string is never freed.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_str()
        .unwrap_or("")
}

/// How many libcairn handles are open in this process (for leak checks).
pub fn open_handles() -> i32 {
    // SAFETY: no arguments; never fails.
    unsafe { ffi::cairn_open_handles() }
}
