//! Embedded mode: every method, and the errors it can provoke.

mod common;

use cairn::*;
use common::*;
use serde_json::json;

#[test]
fn client_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Client>();
    assert_send_sync::<Error>();
    fn assert_send<T: Send>() {}
    assert_send::<Subscription<'static>>();
}

#[test]
fn every_method_embedded() {
    let ws = TempDir::new("emb");
    let c = embedded(&ws);
    assert_eq!(c.status().unwrap().mode, "embedded");
    assert!(c.status().unwrap().daemon.is_none());
    exercise_all(&c);
    c.close().unwrap();
    // The store survives the handle: reopen and find the session.
    let c = embedded(&ws);
    assert_eq!(c.resume_session("s1").unwrap().snapshot.messages.len(), 4);
}

#[test]
fn raw_calls() {
    let ws = TempDir::new("raw");
    let c = embedded(&ws);
    let out = c.call("status", b"").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["mode"], "embedded");
    let st: LibStatus = c.call_json("status", &json!({})).unwrap();
    assert_eq!(st.mode, "embedded");
    let hello: serde_json::Value = c.call_json("hello", &json!({})).unwrap();
    assert!(hello.is_object());
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> ErrorCode {
    let e = r.expect_err("expected an error");
    assert!(!e.message.is_empty(), "empty message for {:?}", e.code);
    assert!(e.to_string().contains(e.code.as_str()));
    e.code
}

#[test]
fn error_codes_embedded() {
    let ws = TempDir::new("err");
    let c = embedded(&ws);
    c.save("s", &Change::append_messages([json!("m1")]), None)
        .unwrap();

    // not_found
    assert_eq!(code(c.resume_session("missing")), ErrorCode::NotFound);
    assert_eq!(code(c.delete("missing")), ErrorCode::NotFound);
    assert_eq!(code(c.export("missing")), ErrorCode::NotFound);
    // conflict: a stale expect_generation changes nothing; a taken id
    assert_eq!(
        code(c.save("s", &Change::append_messages([json!("x")]), Some(7))),
        ErrorCode::Conflict
    );
    assert_eq!(
        code(c.save("s", &Change::append_messages([json!("x")]), Some(0))),
        ErrorCode::Conflict
    );
    assert_eq!(
        c.resume_session("s").unwrap().snapshot.messages,
        [json!("m1")]
    );
    c.save("t", &Change::append_messages([json!("t")]), None)
        .unwrap();
    assert_eq!(code(c.fork("s", "t", None)), ErrorCode::Conflict);
    // schema_unsupported: a newer snapshot, a newer envelope
    let future = Snapshot {
        schema_version: 99,
        ..Snapshot::default()
    };
    assert_eq!(
        code(c.save("f", &future, None)),
        ErrorCode::SchemaUnsupported
    );
    let mut env = c.export("s").unwrap();
    env["schema_version"] = json!(99);
    c.delete("s").unwrap();
    assert_eq!(code(c.import(&env)), ErrorCode::SchemaUnsupported);
    // invalid_argument: an empty id, an unknown params field, an unknown event
    assert_eq!(
        code(c.save("", &Change::append_messages([json!(1)]), None)),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(c.call("resumeSession", br#"{"session_id":"t","bogus":1}"#)),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(c.subscribe(&["no.such.event"])),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(c.call("status", b"{not json")),
        ErrorCode::InvalidArgument
    );
    // no_checkpoint: a run without one, an unknown run, a completed run
    let run = c.begin_run("t", None).unwrap();
    assert_eq!(
        code(c.resume_run(&run.run_id, None, None)),
        ErrorCode::NoCheckpoint
    );
    assert_eq!(
        code(c.resume_run("no-such-run", None, None)),
        ErrorCode::NoCheckpoint
    );
    c.checkpoint(&CheckpointRequest {
        run_id: (&run.run_id).into(),
        turn: 1,
        ..Default::default()
    })
    .unwrap();
    // not_owner: the run belongs to another session
    c.save("other", &Change::append_messages([json!(1)]), None)
        .unwrap();
    assert_eq!(
        code(c.resume_run(&run.run_id, Some("other"), None)),
        ErrorCode::NotOwner
    );
    c.complete_run(&CompleteRunRequest {
        run_id: (&run.run_id).into(),
        status: run_status::COMPLETED.into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        code(c.resume_run(&run.run_id, None, None)),
        ErrorCode::NoCheckpoint
    );
    // step_identity_changed
    c.begin_workflow("w", &[StepSpec::new("a", "v1")], None)
        .unwrap();
    c.complete_step("w", "a", "v1", Some(&json!(1)), None)
        .unwrap();
    assert_eq!(
        code(c.begin_workflow("w", &[StepSpec::new("a", "v2")], None)),
        ErrorCode::StepIdentityChanged
    );
    // method_not_found
    assert_eq!(
        code(c.call("noSuchMethod", b"{}")),
        ErrorCode::MethodNotFound
    );
    assert_eq!(
        code(c.call_json::<_, serde_json::Value>("noSuchMethod", &json!({}))),
        ErrorCode::MethodNotFound
    );
    // bad_handle after close; close again is a no-op
    c.close().unwrap();
    assert_eq!(code(c.status()), ErrorCode::BadHandle);
    assert_eq!(
        code(c.save("t", &Change::append_messages([json!(1)]), None)),
        ErrorCode::BadHandle
    );
    c.close().unwrap();
    // invalid_argument at connect: no such workspace
    let missing = ws.path().join("no-such-dir");
    assert_eq!(
        code(cairn::connect(Options::new(&missing).embedded(true))),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn locked_by_second_embedded_handle() {
    let ws = TempDir::new("lock");
    let c = embedded(&ws);
    let e = cairn::connect(Options::new(ws.path()).embedded(true)).unwrap_err();
    assert_eq!(e.code, ErrorCode::Locked, "{e}");
    c.close().unwrap();
    embedded(&ws).close().unwrap(); // the lock is released by close
}

#[test]
fn error_code_round_trip() {
    for c in ErrorCode::ALL.iter() {
        assert_eq!(&ErrorCode::from_code(c.as_str()), c);
    }
    assert_eq!(
        ErrorCode::from_code("brand_new"),
        ErrorCode::Other("brand_new".into())
    );
    for rc in cairn::sys::CAIRN_E_NO_SPACE..=-1 {
        assert!(!matches!(ErrorCode::from_rc(rc), ErrorCode::Other(_)));
    }
    assert_eq!(ErrorCode::from_code("corrupt"), ErrorCode::Corrupt);
    assert_eq!(ErrorCode::from_code("no_space"), ErrorCode::NoSpace);
    assert_eq!(
        ErrorCode::from_rc(cairn::sys::CAIRN_E_CORRUPT),
        ErrorCode::Corrupt
    );
    assert_eq!(
        ErrorCode::from_rc(cairn::sys::CAIRN_E_NO_SPACE),
        ErrorCode::NoSpace
    );
}

#[test]
fn results_tolerate_unknown_fields_and_nulls() {
    let s: ResumeSessionResult = serde_json::from_value(json!({
        "snapshot": {"schema_version": 1, "session_id": "x", "generation": 3, "messages": null,
                     "future_field": {"a": 1}, "runs": null},
        "generation": 3, "drift": {"tracked": false, "added": null}, "interrupted_runs": null,
        "new_top_level": true
    }))
    .unwrap();
    assert_eq!(s.snapshot.session_id, "x");
    assert!(s.snapshot.messages.is_empty());
    assert!(s.interrupted_runs.is_empty());
}

#[test]
fn version_is_set() {
    assert!(!cairn::version().is_empty());
}

#[test]
fn forked_child_fails_clearly() {
    unsafe extern "C" {
        fn fork() -> i32;
        fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
        fn _exit(code: i32) -> !;
    }
    let ws = TempDir::new("fork");
    let c = embedded(&ws);
    c.status().unwrap();
    // SAFETY: the child only calls into libcairn (which fails fast before
    // entering Go) and then _exit()s without unwinding.
    let pid = unsafe { fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let ok = matches!(
            c.status(),
            Err(Error {
                code: ErrorCode::Forked,
                ..
            })
        ) && matches!(
            cairn::connect(Options::new(ws.path()).embedded(true)),
            Err(Error {
                code: ErrorCode::Forked,
                ..
            })
        );
        unsafe { _exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: pid is our child.
    let r = unsafe { waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert_eq!(
        status, 0,
        "the child did not see `forked` errors (wait status {status})"
    );
    c.status().unwrap(); // the parent is unaffected
}
