//! The raw C ABI of libcairn (see `capi/cairn.h`). Private to the crate.

use std::ffi::{c_char, c_int, c_void};

pub const CAIRN_OK: c_int = 0;

unsafe extern "C" {
    pub fn cairn_version() -> *const c_char;
    pub fn cairn_open(
        options_json: *const c_char,
        handle: *mut u64,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn cairn_call(
        handle: u64,
        method: *const c_char,
        request: *const u8,
        request_len: usize,
        response: *mut *mut u8,
        response_len: *mut usize,
        err: *mut *mut c_char,
    ) -> c_int;
    pub fn cairn_close(handle: u64, err: *mut *mut c_char) -> c_int;
    pub fn cairn_free(p: *mut c_void);
    pub fn cairn_open_handles() -> c_int;
}

/// A buffer the library returned; freed with `cairn_free` on drop.
pub struct Buf {
    pub ptr: *mut u8,
    pub len: usize,
}

impl Buf {
    pub fn as_slice(&self) -> &[u8] {
        if self.ptr.is_null() || self.len == 0 {
            &[]
        } else {
            // SAFETY: the library returned ptr with len readable bytes, and
            // they stay valid until cairn_free (in Drop).
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: ptr came from the library and is freed exactly once.
            unsafe { cairn_free(self.ptr.cast()) }
        }
    }
}

/// An error text the library returned (NUL-terminated); freed on drop.
pub struct ErrText(pub *mut c_char);

impl ErrText {
    pub fn bytes(&self) -> &[u8] {
        if self.0.is_null() {
            &[]
        } else {
            // SAFETY: the library returned a NUL-terminated string that
            // stays valid until cairn_free (in Drop).
            unsafe { std::ffi::CStr::from_ptr(self.0) }.to_bytes()
        }
    }
}

impl Drop for ErrText {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from the library and is freed once.
            unsafe { cairn_free(self.0.cast()) }
        }
    }
}
