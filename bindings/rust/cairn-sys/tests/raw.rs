//! The raw declarations against the real libcairn: they link, and the
//! calling conventions of cairn.h hold (codes, error JSON, cairn_free).

use cairn_sys::*;
use std::ffi::{CStr, c_char};
use std::fs::File;
use std::io::Read;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::ptr;
use std::sync::mpsc;
use std::time::Duration;

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

#[test]
fn submitted_calls_come_back_through_take() {
    let mut fd = -1;
    let mut err: *mut c_char = ptr::null_mut();
    // SAFETY: the out-pointers are valid.
    assert_eq!(unsafe { cairn_completion_fd(&mut fd, &mut err) }, CAIRN_OK);
    assert!(fd >= 0);

    // A call on an invalid handle is queued; its error comes through take.
    let mut ticket = 0u64;
    // SAFETY: the method is NUL-terminated; no request; the out-pointers
    // are valid.
    let rc = unsafe { cairn_submit(0, c"status".as_ptr(), ptr::null(), 0, &mut ticket, &mut err) };
    assert_eq!(rc, CAIRN_OK);
    assert_ne!(ticket, 0);

    // The ticket arrives on the pipe (read on a thread, so a missing one
    // fails the test instead of hanging it).
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: the library owns the fd for the life of the process;
        // ManuallyDrop never closes it.
        let mut pipe = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
        let mut b = [0u8; 8];
        let _ = tx.send(pipe.read_exact(&mut b).map(|()| u64::from_ne_bytes(b)));
    });
    let done = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("no ticket on the completion pipe")
        .expect("read the completion pipe");
    assert_eq!(done, ticket);

    let mut resp: *mut u8 = ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: the out-pointers are valid.
    let rc = unsafe { cairn_take(ticket, &mut resp, &mut len, &mut err) };
    assert_eq!(rc, CAIRN_E_BAD_HANDLE);
    assert!(resp.is_null());
    assert!(text(err).contains("bad_handle"));

    // The ticket was released: taking it again is bad_ticket.
    let mut err: *mut c_char = ptr::null_mut();
    // SAFETY: as above.
    let rc = unsafe { cairn_take(ticket, &mut resp, &mut len, &mut err) };
    assert_eq!(rc, CAIRN_E_BAD_TICKET);
    assert!(text(err).contains("bad_ticket"));
}

#[test]
fn call_buf_answers_a_small_result_in_the_callers_buffer() {
    let ws = std::env::temp_dir().join(format!("cairn-sys-callbuf-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    let opts = std::ffi::CString::new(format!(
        "{{\"workspace\":{:?},\"embedded\":true}}",
        ws.to_str().unwrap()
    ))
    .unwrap();
    let mut h = 0u64;
    let mut err: *mut c_char = ptr::null_mut();
    // SAFETY: the options are NUL-terminated; the out-pointers are valid.
    let rc = unsafe { cairn_open(opts.as_ptr(), &mut h, &mut err) };
    assert_eq!(
        rc,
        CAIRN_OK,
        "{}",
        if err.is_null() {
            String::new()
        } else {
            text(err)
        }
    );

    let req = br#"{"session_id":"s","change":{"append_messages":["hello"]}}"#;
    let mut buf = [0u8; 64];
    let mut resp: *mut u8 = ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: the request and buffer outlive the call; the out-pointers are valid.
    let rc = unsafe {
        cairn_call_buf(
            h,
            c"save".as_ptr(),
            req.as_ptr(),
            req.len(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut resp,
            &mut len,
            &mut err,
        )
    };
    assert_eq!(rc, CAIRN_OK);
    assert!(resp.is_null());
    assert_eq!(&buf[..len], br#"{"generation":1}"#);

    // Too small a buffer: the result is allocated, as cairn_call's.
    let req = br#"{"session_id":"s"}"#;
    // SAFETY: as above.
    let rc = unsafe {
        cairn_call_buf(
            h,
            c"resumeSession".as_ptr(),
            req.as_ptr(),
            req.len(),
            buf.as_mut_ptr(),
            8,
            &mut resp,
            &mut len,
            &mut err,
        )
    };
    assert_eq!(rc, CAIRN_OK);
    assert!(!resp.is_null() && len > 8);
    // SAFETY: resp holds len bytes from the library.
    let got = unsafe { std::slice::from_raw_parts(resp, len) }.to_vec();
    // SAFETY: resp came from the library; freed once.
    unsafe { cairn_free(resp.cast()) };
    assert!(String::from_utf8_lossy(&got).contains(r#""messages":["hello"]"#));

    // SAFETY: h is open; err is valid.
    assert_eq!(unsafe { cairn_close(h, &mut err) }, CAIRN_OK);
    std::fs::remove_dir_all(&ws).unwrap();
}

#[test]
fn ws_mask_xors_with_the_key_repeated() {
    let key = [0x12u8, 0x34, 0x56, 0x78];
    for n in [0usize, 1, 3, 4, 7, 8, 9, 15, 16, 17, 8422] {
        let orig: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
        let mut buf = orig.clone();
        // SAFETY: buf holds n bytes and key 4.
        unsafe { cairn_ws_mask(buf.as_mut_ptr(), n, key.as_ptr()) };
        let want: Vec<u8> = orig.iter().enumerate().map(|(i, b)| b ^ key[i % 4]).collect();
        assert_eq!(buf, want, "n = {n}");
        // SAFETY: as above; masking twice gives the bytes back.
        unsafe { cairn_ws_mask(buf.as_mut_ptr(), n, key.as_ptr()) };
        assert_eq!(buf, orig, "n = {n}");
    }
}
