//! Owners of what libcairn returns, over the raw declarations of
//! `cairn-sys`. Private to the crate.

pub use cairn_sys::{
    CAIRN_OK, cairn_call, cairn_close, cairn_free, cairn_open, cairn_open_handles, cairn_version,
};
use std::ffi::c_char;

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
