//! export_file and import_file, embedded and through the daemon: the file
//! holds the envelope `export` answers, its loop checkpoint and owned
//! workflow included, and importing it into another workspace lets the run
//! resume and the workflow continue there.

mod common;

use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

use cairn::*;
use common::*;
use serde_json::{Value, json};

fn msg(i: usize) -> Value {
    json!({"role": "user", "content": format!("m{i}")})
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> ErrorCode {
    r.expect_err("expected an error").code
}

/// `p` (absolute) as a path relative to this process's working directory,
/// so the binding, not the library, must resolve it.
fn relative_to_cwd(p: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let ups = cwd
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count();
    let mut rel: PathBuf = std::iter::repeat_n("..", ups).collect();
    rel.push(p.strip_prefix("/").unwrap());
    assert!(rel.is_relative());
    rel
}

const SID: &str = "to-file";

fn steps() -> [StepSpec; 2] {
    [StepSpec::new("a", "ia"), StepSpec::new("b", "ib")]
}

/// Exports a session with a checkpointed run and an owned workflow from
/// `a` into a file, imports the file into `b` (another workspace), and
/// continues the run and the workflow there.
fn round_trip(a: &Client, a_ws: &Path, b: &Client) {
    let bytes = [0u8, 255, 7];
    let snap = Snapshot {
        messages: (0..3).map(msg).collect(),
        artifacts: vec![Artifact {
            metadata: Some(json!({"k": 1})),
            ..Artifact::with_bytes("art", &bytes)
        }],
        ..Snapshot::default()
    };
    a.save(SID, &snap, Some(0)).unwrap();
    let run = a.begin_run(SID, Some("r1")).unwrap();
    let state = json!({"step": 1});
    let usage = Usage {
        total_tokens: 3,
        ..Usage::default()
    };
    let turn = [msg(3)];
    a.checkpoint(&CheckpointRequest {
        run_id: (&run.run_id).into(),
        turn: 1,
        new_messages: (&turn[..]).into(),
        usage,
        state: Some(Cow::Borrowed(&state)),
        ..Default::default()
    })
    .unwrap();
    assert!(
        a.begin_workflow("w", &steps(), Some(SID))
            .unwrap()
            .is_empty()
    );
    a.complete_step("w", "a", "ia", Some(&json!({"ok": 1})), Some(SID))
        .unwrap();
    let before = a.resume_session(SID).unwrap();

    // export_file: a relative path is resolved here; the file is the
    // envelope export answers.
    let dir = a_ws.join("out");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("session.json");
    let r = a.export_file(SID, relative_to_cwd(&file)).unwrap();
    assert_eq!(Path::new(&r.path), file);
    assert_eq!(r.generation, before.generation);
    let text = std::fs::read(&file).unwrap();
    assert_eq!(r.bytes, text.len() as u64);
    let doc: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(doc, a.export(SID).unwrap());

    // The envelope carries the run's checkpoint and the owned workflow.
    let env: Envelope = serde_json::from_slice(&text).unwrap();
    assert_eq!(env.session.as_ref().unwrap().session_id, SID);
    let cps: Vec<_> = env
        .checkpoints
        .iter()
        .map(|c| (c.run_id.as_str(), c.session_id.as_str(), c.turn))
        .collect();
    assert_eq!(cps, [("r1", SID, 1)]);
    assert_eq!(env.checkpoints[0].state.as_ref(), Some(&state));
    assert_eq!(env.workflows.len(), 1);
    let w = &env.workflows[0];
    assert_eq!((w.workflow_id.as_str(), w.session_id.as_str()), ("w", SID));
    let done: Vec<_> = w.steps.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(done, ["a"]);

    // import_file into another workspace.
    let imp = b.import_file(&file).unwrap();
    assert_eq!(imp.session_id, SID);
    let after = b.resume_session(SID).unwrap();
    assert_eq!(after.snapshot.messages, before.snapshot.messages);
    assert_eq!(after.snapshot.artifacts, before.snapshot.artifacts);
    assert_eq!(after.snapshot.artifacts[0].bytes().unwrap().unwrap(), bytes);
    assert_eq!(after.snapshot.runs, before.snapshot.runs);
    let ir: Vec<_> = after
        .interrupted_runs
        .iter()
        .map(|r| (r.run_id.as_str(), r.turn))
        .collect();
    assert_eq!(ir, [("r1", 1)]);
    let one = b.run("r1", Some(SID)).unwrap();
    let cp = one.checkpoint.expect("the checkpoint survived the import");
    assert_eq!((cp.turn, cp.message_count), (1, 4));
    assert_eq!(cp.state.as_ref(), Some(&state));

    // The run resumes there from its checkpoint ...
    let rr = b.resume_run("r1", Some(SID), Some("r2")).unwrap();
    assert_eq!((rr.run_id.as_str(), rr.resumed_from.as_str()), ("r2", "r1"));
    assert_eq!(rr.messages, before.snapshot.messages);
    assert_eq!(rr.turn, 1);
    assert_eq!(rr.usage, usage);
    assert_eq!(rr.state.as_ref(), Some(&state));
    // ... and the workflow continues: step a is done.
    let done = b.begin_workflow("w", &steps(), Some(SID)).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].step_id, "a");
    assert_eq!(done[0].result, Some(json!({"ok": 1})));
    b.complete_step("w", "b", "ib", None, Some(SID)).unwrap();
    b.finish_workflow("w").unwrap();

    // The workspace it came from is untouched.
    assert_eq!(
        a.run("r1", Some(SID)).unwrap().checkpoint.map(|c| c.turn),
        Some(1)
    );

    // Importing the same session again is a conflict.
    assert_eq!(code(b.import_file(&file)), ErrorCode::Conflict);
}

fn refusals(c: &Client, ws: &Path) {
    c.save("s", &Change::append_messages([msg(0)]), None)
        .unwrap();
    let out = ws.join("x.json");
    assert_eq!(
        code(c.import_file(ws.join("no-such-file.json"))),
        ErrorCode::NotFound
    );
    assert_eq!(code(c.export_file("missing", &out)), ErrorCode::NotFound);
    assert!(!out.exists());
    assert_eq!(code(c.export_file("s", "")), ErrorCode::InvalidArgument);
    assert_eq!(code(c.import_file("")), ErrorCode::InvalidArgument);
    // A directory is not replaced.
    assert_eq!(code(c.export_file("s", ws)), ErrorCode::InvalidArgument);
    assert_eq!(code(c.import_file(ws)), ErrorCode::InvalidArgument);
    // A path the wire cannot carry is refused before it is sent.
    {
        use std::os::unix::ffi::OsStrExt;
        let bad = ws.join(std::ffi::OsStr::from_bytes(b"\xff.json"));
        assert_eq!(code(c.export_file("s", &bad)), ErrorCode::InvalidArgument);
    }
    // What is exported here imports here once the session is gone.
    let r = c.export_file("s", &out).unwrap();
    c.delete("s").unwrap();
    assert_eq!(c.import_file(&r.path).unwrap().generation, 1);
    assert_eq!(c.summary("s").unwrap().message_count, 1);
}

#[test]
fn files_embedded() {
    let (wa, wb) = (TempDir::new("fa"), TempDir::new("fb"));
    let (a, b) = (embedded(&wa), embedded(&wb));
    round_trip(&a, wa.path(), &b);
    refusals(&a, wa.path());
}

#[test]
fn files_daemon() {
    let (a, b) = (Daemon::start("fda"), Daemon::start("fdb"));
    assert_ne!(a.pid, b.pid);
    round_trip(&a.client, a.ws.path(), &b.client);
    refusals(&a.client, a.ws.path());
}
