//! The raw declarations against the real libcairn: they link, and the
//! calling conventions of cairn.h hold (codes, error JSON, cairn_free).

use cairn_sys::*;
use std::ffi::{CStr, c_char};
use std::ptr;

fn text(p: *mut c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the library returned a NUL-terminated string; freed once below.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    // SAFETY: p came from the library.
    unsafe { cairn_free(p.cast()) };
    s
}

#[test]
fn version_is_static_text() {
    // SAFETY: no arguments; the string is static.
    let v = unsafe { CStr::from_ptr(cairn_version()) };
    assert!(!v.to_bytes().is_empty());
}

#[test]
fn errors_carry_a_code_and_json() {
    let mut err: *mut c_char = ptr::null_mut();
    let mut resp: *mut u8 = ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: handle 0 is never valid; the out-pointers are valid.
    let rc = unsafe {
        cairn_call(
            0,
            c"status".as_ptr(),
            ptr::null(),
            0,
            &mut resp,
            &mut len,
            &mut err,
        )
    };
    assert_eq!(rc, CAIRN_E_BAD_HANDLE);
    assert!(resp.is_null());
    let e = text(err);
    assert!(e.contains("\"code\":\"bad_handle\""), "{e}");

    // Unknown option names are rejected before anything opens.
    let mut h = 0u64;
    let mut err: *mut c_char = ptr::null_mut();
    // SAFETY: the options are NUL-terminated; the out-pointers are valid.
    let rc = unsafe { cairn_open(c"{\"no_such_option\":1}".as_ptr(), &mut h, &mut err) };
    assert_eq!(rc, CAIRN_E_INVALID_ARGUMENT);
    assert!(text(err).contains("invalid_argument"));
    // SAFETY: NULL is a no-op.
    unsafe { cairn_free(ptr::null_mut()) };
}
