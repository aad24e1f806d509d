//! Raw FFI declarations of libcairn's C ABI, as `capi/cairn.h` declares it.
//!
//! This crate only declares and links; it wraps nothing. Every function is
//! `unsafe` to call and follows the conventions of `cairn.h`: it returns
//! [`CAIRN_OK`] or a negative `CAIRN_E_*` code; on failure `*err` receives
//! a NUL-terminated JSON object `{"code", "message"}`; every buffer the
//! library returns is freed with [`cairn_free`]. Use the `cairn` crate for
//! a safe API.
//!
//! Linking, chosen by the build script:
//!
//! - The packaged crate (crates.io, `make dist-rust`) carries libcairn's Go
//!   sources with their dependencies vendored, builds a static `libcairn.a`
//!   with `go build -buildmode=c-archive` and links it into the dependent's
//!   binary, and builds `cairnd` beside it ([`DAEMON`]). We chose static
//!   linking over loading a shared library at run time because a binary
//!   that holds libcairn needs nothing at run time (no `LD_LIBRARY_PATH`,
//!   no rpath, no library to install or find), and a build script's rpath
//!   would reach only this crate's own targets, not its dependents'. The
//!   price: building needs the Go toolchain (the version `go/go.mod`
//!   names, or newer) and a C compiler, and links the Go runtime (about
//!   10 MB) into the binary.
//! - `$CAIRN_LIB_DIR` set, or a checkout of the repository (no `go/`
//!   directory): the shared `libcairn.so` of that directory, else of the
//!   repository's `build/` (`make lib`), with an rpath to it; the directory
//!   is published to dependents as `DEP_CAIRN_LIB_DIR`.
//!
//! The fork rule: the Go runtime inside libcairn does not survive `fork()`
//! without `exec()`; a call in a forked child fails with
//! [`CAIRN_E_FORKED`] instead of hanging.

#![no_std]

use core::ffi::{c_char, c_int, c_void};

/// The absolute path of the `cairnd` the build script built beside a
/// static libcairn, or `None` when it linked a shared one. The `cairn`
/// crate starts it when the caller names no daemon and `CAIRN_DAEMON` is
/// unset (and the file still exists: it lives in cargo's target
/// directory, so a binary copied elsewhere finds `cairnd` next to itself
/// or on `PATH` instead).
pub const DAEMON: Option<&str> = match option_env!("CAIRN_SYS_BUILT_DAEMON") {
    Some(p) if !p.is_empty() => Some(p),
    _ => None,
};

/// The ABI version of the header these declarations follow.
pub const CAIRN_ABI_VERSION: c_int = 2;

/// Success.
pub const CAIRN_OK: c_int = 0;
/// `internal`: I/O failure, broken invariant.
pub const CAIRN_E_INTERNAL: c_int = -1;
/// `invalid_argument` (also bad JSON, unknown params field).
pub const CAIRN_E_INVALID_ARGUMENT: c_int = -2;
/// `not_found`.
pub const CAIRN_E_NOT_FOUND: c_int = -3;
/// `conflict`: expect_generation mismatch, id taken.
pub const CAIRN_E_CONFLICT: c_int = -4;
/// `schema_unsupported`: a newer schema_version.
pub const CAIRN_E_SCHEMA_UNSUPPORTED: c_int = -5;
/// `too_large`.
pub const CAIRN_E_TOO_LARGE: c_int = -6;
/// `no_checkpoint`: resumeRun of a run with none.
pub const CAIRN_E_NO_CHECKPOINT: c_int = -7;
/// `not_owner`: the run belongs to another session.
pub const CAIRN_E_NOT_OWNER: c_int = -8;
/// `step_identity_changed`.
pub const CAIRN_E_STEP_IDENTITY_CHANGED: c_int = -9;
/// `locked`: another process holds the workspace store.
pub const CAIRN_E_LOCKED: c_int = -10;
/// `unavailable`: no daemon, connection lost, shutting down.
pub const CAIRN_E_UNAVAILABLE: c_int = -11;
/// `forked`: called in a forked child (see the fork rule).
pub const CAIRN_E_FORKED: c_int = -12;
/// `bad_handle`: unknown or closed handle.
pub const CAIRN_E_BAD_HANDLE: c_int = -13;
/// `method_not_found`.
pub const CAIRN_E_METHOD_NOT_FOUND: c_int = -14;
/// `bad_request`: the daemon rejected the message.
pub const CAIRN_E_BAD_REQUEST: c_int = -15;
/// `bad_ticket`: [`cairn_take`] of an unknown, unfinished or already taken
/// ticket.
pub const CAIRN_E_BAD_TICKET: c_int = -16;
/// `corrupt`: a log or file of the store is damaged (see `cairn verify`,
/// `cairn repair`).
pub const CAIRN_E_CORRUPT: c_int = -17;
/// `no_space`: the file system is full, or a quota or file size limit is
/// reached; retry after freeing space.
pub const CAIRN_E_NO_SPACE: c_int = -18;

unsafe extern "C" {
    /// The library version, e.g. "0.1.0": a static string, never freed.
    pub fn cairn_version() -> *const c_char;

    /// Opens a handle. `options_json` (NULL or "" for defaults) is a JSON
    /// object: `workspace`, `embedded`, `daemon`, `auto_start`,
    /// `daemon_args`; unknown names are rejected.
    pub fn cairn_open(
        options_json: *const c_char,
        handle: *mut u64,
        err: *mut *mut c_char,
    ) -> c_int;

    /// Runs one method on the calling thread and waits for it. `request`
    /// may be NULL when `request_len` is 0. On [`CAIRN_OK`], `*response`
    /// and `*response_len` hold the JSON result (free it with
    /// [`cairn_free`]).
    pub fn cairn_call(
        handle: u64,
        method: *const c_char,
        request: *const u8,
        request_len: usize,
        response: *mut *mut u8,
        response_len: *mut usize,
        err: *mut *mut c_char,
    ) -> c_int;

    /// [`cairn_call`] for a caller that keeps a buffer for small results:
    /// a result of at most `buf_cap` bytes is written into `buf`,
    /// `*response` is set to NULL and `*response_len` to its length (nothing
    /// to free); a larger one is answered as [`cairn_call`] answers it
    /// (`*response` not NULL, freed with [`cairn_free`]). `buf` may be NULL
    /// when `buf_cap` is 0. Each concurrent call needs a buffer of its own.
    pub fn cairn_call_buf(
        handle: u64,
        method: *const c_char,
        request: *const u8,
        request_len: usize,
        buf: *mut u8,
        buf_cap: usize,
        response: *mut *mut u8,
        response_len: *mut usize,
        err: *mut *mut c_char,
    ) -> c_int;

    /// Masks (or unmasks) the `n` bytes at `buf` in place with a WebSocket
    /// masking key (RFC 6455 section 5.3): byte `i` is XORed with
    /// `key[i % 4]`. Plain C, for a binding that speaks the wire protocol
    /// itself; it never enters the Go runtime and needs no handle.
    pub fn cairn_ws_mask(buf: *mut u8, n: usize, key: *const u8);

    /// Queues one method call for a thread the library owns and returns at
    /// once. [`CAIRN_OK`]: `*ticket` (never 0) identifies the call; when it
    /// finishes, the ticket is written to the pipe of
    /// [`cairn_completion_fd`] and [`cairn_take`] returns its outcome
    /// (success or error). A `CAIRN_E_*` code: the call could not be queued
    /// and `*ticket` is 0. The request bytes are copied.
    pub fn cairn_submit(
        handle: u64,
        method: *const c_char,
        request: *const u8,
        request_len: usize,
        ticket: *mut u64,
        err: *mut *mut c_char,
    ) -> c_int;

    /// The read end of the pipe finished tickets are written to (8 bytes
    /// each, native byte order). The same fd for the life of the process,
    /// shared by every handle; do not close it, and read it from one place
    /// only.
    pub fn cairn_completion_fd(fd: *mut c_int, err: *mut *mut c_char) -> c_int;

    /// The outcome of a finished submitted call, exactly as `cairn_call`
    /// would return it; releases the ticket. Any value is safe to pass: an
    /// unknown, unfinished or already taken ticket gets
    /// [`CAIRN_E_BAD_TICKET`].
    pub fn cairn_take(
        ticket: u64,
        response: *mut *mut u8,
        response_len: *mut usize,
        err: *mut *mut c_char,
    ) -> c_int;

    /// Frees a buffer returned by this library. NULL is a no-op.
    pub fn cairn_free(p: *mut c_void);

    /// Closes a handle: embedded mode closes the store and releases its
    /// lock; daemon mode closes the connection (the daemon keeps running).
    pub fn cairn_close(handle: u64, err: *mut *mut c_char) -> c_int;

    /// How many handles are open (for leak tests).
    pub fn cairn_open_handles() -> c_int;
}
