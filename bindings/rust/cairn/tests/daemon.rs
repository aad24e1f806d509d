//! Daemon mode: auto-start, every method, daemon-only errors.

mod common;

use cairn::*;
use common::*;
use serde_json::json;

#[test]
fn every_method_daemon_autostart() {
    let d = Daemon::start("dall");
    assert!(alive(d.pid));
    let st = d.client.status().unwrap();
    assert_eq!(st.mode, "daemon");
    let ds = st.daemon.unwrap();
    assert_eq!(ds.state, "serving");
    assert_eq!(
        std::fs::canonicalize(&ds.workspace).unwrap(),
        std::fs::canonicalize(d.ws.path()).unwrap()
    );
    exercise_all(&d.client);

    // A second client finds the running daemon instead of starting another.
    let c2 = cairn::connect(daemon_options(&d.ws).auto_start(false)).unwrap();
    assert_eq!(c2.status().unwrap().daemon.unwrap().pid, d.pid);
    assert_eq!(c2.resume_session("s1").unwrap().snapshot.messages.len(), 4);
    c2.close().unwrap();
}

#[test]
fn daemon_errors() {
    let d = Daemon::start_with("derr", &["--max-message-size=65536"]);
    let c = &d.client;
    // locked: embedded mode cannot open a store the daemon serves
    let e = cairn::connect(Options::new(d.ws.path()).embedded(true)).unwrap_err();
    assert_eq!(e.code, ErrorCode::Locked, "{e}");
    assert!(e.message.contains("pid"), "{e}");
    // codes travel from the daemon unchanged
    assert_eq!(
        c.resume_session("missing").unwrap_err().code,
        ErrorCode::NotFound
    );
    c.save("s", &Change::append_messages([json!(1)]), None)
        .unwrap();
    assert_eq!(
        c.save("s", &Change::append_messages([json!(2)]), Some(9))
            .unwrap_err()
            .code,
        ErrorCode::Conflict
    );
    assert_eq!(
        c.resume_run("nope", None, None).unwrap_err().code,
        ErrorCode::NoCheckpoint
    );
    let run = c.begin_run("s", None).unwrap();
    c.checkpoint(&CheckpointRequest {
        run_id: (&run.run_id).into(),
        turn: 1,
        ..Default::default()
    })
    .unwrap();
    c.save("o", &Change::append_messages([json!(1)]), None)
        .unwrap();
    assert_eq!(
        c.resume_run(&run.run_id, Some("o"), None).unwrap_err().code,
        ErrorCode::NotOwner
    );
    c.begin_workflow("w", &[StepSpec::new("a", "1")], None)
        .unwrap();
    c.complete_step("w", "a", "1", None, None).unwrap();
    assert_eq!(
        c.begin_workflow("w", &[StepSpec::new("a", "2")], None)
            .unwrap_err()
            .code,
        ErrorCode::StepIdentityChanged
    );
    let future = Snapshot {
        schema_version: 2,
        ..Snapshot::default()
    };
    assert_eq!(
        c.save("f", &future, None).unwrap_err().code,
        ErrorCode::SchemaUnsupported
    );
    assert_eq!(
        c.save("", &Change::append_messages([json!(1)]), None)
            .unwrap_err()
            .code,
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        c.call("noSuchMethod", b"{}").unwrap_err().code,
        ErrorCode::MethodNotFound
    );
    // too_large: a request over the daemon's message size limit
    let big = "x".repeat(100_000);
    let e = c
        .save("s", &Change::append_messages([json!(big)]), None)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::TooLarge, "{e}");
    c.status().unwrap(); // the connection goes on serving
    // bad_handle after close
    let c2 = cairn::connect(daemon_options(&d.ws)).unwrap();
    c2.close().unwrap();
    assert_eq!(c2.status().unwrap_err().code, ErrorCode::BadHandle);
}

#[test]
fn unavailable_without_autostart() {
    let ws = TempDir::new("unav");
    let e = cairn::connect(daemon_options(&ws).auto_start(false)).unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
    assert_eq!(e.code.as_str(), "unavailable");
}

#[test]
fn daemon_outlives_client_close() {
    let d = Daemon::start("dclose");
    d.client
        .save("s", &Change::append_messages([json!("kept")]), None)
        .unwrap();
    d.client.close().unwrap();
    assert!(alive(d.pid));
    let c = cairn::connect(daemon_options(&d.ws).auto_start(false)).unwrap();
    assert_eq!(
        c.resume_session("s").unwrap().snapshot.messages,
        [json!("kept")]
    );
}
