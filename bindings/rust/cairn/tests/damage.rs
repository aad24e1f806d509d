//! A damaged session log through the binding, in each mode: `list_sessions`
//! shows it as corrupt, reads fail with `ErrorCode::Corrupt`, `verify`
//! reports it, `repair` without apply writes nothing and, applied, salvages
//! the intact prefix and keeps the original bytes in quarantine. The log is
//! damaged while no engine holds the store.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn::*;
use common::*;
use serde_json::{Value, json};

const COMMITS: usize = 20;
const MSG_BYTES: usize = 5000;

fn msg(i: usize, size: usize) -> Value {
    json!({"role": "user", "content": format!("message {i} {}", "x".repeat(size))})
}

fn log_path(ws: &Path, sid: &str) -> PathBuf {
    ws.join(".cairn")
        .join("sessions")
        .join(format!("s-{sid}.log"))
}

fn quarantined(ws: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(ws.join(".cairn").join("quarantine")) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> ErrorCode {
    r.expect_err("the call should fail").code
}

/// Saves COMMITS commits of one ~5 KB message each to session "bad" and
/// one to "good", closes the store, flips a bit in the middle of "bad"'s
/// log (inside a middle commit, with intact commits after it) and returns
/// the damaged bytes.
fn damage(ws: &TempDir) -> Vec<u8> {
    let c = embedded(ws);
    for i in 0..COMMITS {
        c.save("bad", &Change::append_messages([msg(i, MSG_BYTES)]), None)
            .unwrap();
    }
    c.save("good", &Change::append_messages([msg(0, 0)]), None)
        .unwrap();
    c.close().unwrap();
    let path = log_path(ws.path(), "bad");
    let mut data = std::fs::read(&path).unwrap();
    assert!(
        data.len() > COMMITS * MSG_BYTES,
        "the log is smaller than its messages: compacted or not written"
    );
    let at = data.len() / 2;
    data[at] ^= 0x10;
    std::fs::write(&path, &data).unwrap();
    data
}

fn corrupt_session_verify_and_repair(ws: &TempDir, damaged: &[u8], c: &Client) {
    let path = log_path(ws.path(), "bad");
    // Opening the store destroys nothing.
    assert_eq!(std::fs::read(&path).unwrap(), damaged);

    let listed: BTreeMap<String, Summary> = c
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| (s.session_id.clone(), s))
        .collect();
    assert_eq!(listed.keys().collect::<Vec<_>>(), ["bad", "good"]);
    assert_eq!(listed["bad"].state.as_deref(), Some(session_state::CORRUPT));
    assert!(
        listed["bad"]
            .problem
            .as_deref()
            .is_some_and(|p| !p.is_empty())
    );
    assert_eq!(listed["good"].state, None);
    assert_eq!(listed["good"].problem, None);
    assert_eq!(code(c.resume_session("bad")), ErrorCode::Corrupt);
    assert_eq!(
        code(c.messages(
            "bad",
            &MessagesQuery {
                tail: 1,
                ..Default::default()
            }
        )),
        ErrorCode::Corrupt
    );
    assert_eq!(
        c.messages("good", &MessagesQuery::default()).unwrap().total,
        1
    );

    let rep = c.verify().unwrap();
    assert!(!rep.ok);
    assert_eq!(rep.sessions, 2);
    assert_eq!(rep.problems.len(), 1, "{:?}", rep.problems);
    let p = &rep.problems[0];
    assert_eq!(
        (p.kind.as_str(), p.id.as_str(), p.state.as_str()),
        ("session", "bad", session_state::CORRUPT)
    );
    assert!(p.path.ends_with(".cairn/sessions/s-bad.log"), "{}", p.path);
    assert_eq!(p.size, damaged.len() as i64);
    assert!(
        p.generation > 0 && p.generation < COMMITS as u64,
        "generation {}",
        p.generation
    );

    let before = quarantined(ws.path());
    let plan = c.repair(&RepairRequest::session("bad")).unwrap();
    assert!(!plan.applied);
    assert_eq!(
        (plan.kind.as_str(), plan.id.as_str(), plan.state.as_str()),
        ("session", "bad", session_state::CORRUPT)
    );
    assert!(plan.generation > 0 && plan.generation < COMMITS as u64);
    assert!(!plan.lost.is_empty() && plan.lost_bytes > 0);
    assert_eq!(plan.kept_bytes + plan.lost_bytes, damaged.len() as u64);
    // A plan writes nothing.
    assert_eq!(std::fs::read(&path).unwrap(), damaged);
    assert_eq!(quarantined(ws.path()), before);
    assert_eq!(code(c.summary("bad")), ErrorCode::Corrupt);

    let done = c
        .repair(&RepairRequest::session("bad").apply(true))
        .unwrap();
    assert!(done.applied);
    assert_eq!(done.generation, plan.generation);
    let generation = done.generation;
    let state = c.resume_session("bad").unwrap();
    assert_eq!(state.generation, generation);
    let want: Vec<Value> = (0..generation as usize)
        .map(|i| msg(i, MSG_BYTES))
        .collect();
    assert_eq!(state.snapshot.messages, want);
    assert_eq!(
        c.save("bad", &Change::append_messages([msg(99, 0)]), None)
            .unwrap(),
        generation + 1
    );
    let sum = c.summary("bad").unwrap();
    assert_eq!(sum.message_count, generation as i64 + 1);
    assert_eq!(sum.state, None);

    // The original bytes are in quarantine, whole.
    let q = PathBuf::from(&done.quarantine);
    assert_eq!(
        q.parent(),
        Some(ws.path().join(".cairn").join("quarantine").as_path())
    );
    assert_eq!(std::fs::read(&q).unwrap(), damaged);
    let after = c.verify().unwrap();
    assert!(after.ok);
    assert!(after.problems.is_empty());
    assert!(after.quarantine.contains(&done.quarantine));
}

#[test]
fn corrupt_session_embedded() {
    let ws = TempDir::new("dme");
    let damaged = damage(&ws);
    let c = embedded(&ws);
    corrupt_session_verify_and_repair(&ws, &damaged, &c);
    c.close().unwrap();
}

/// Stops the daemon of pid when dropped, so a failed assertion does not
/// leave it running.
struct StopDaemon(i64);

impl Drop for StopDaemon {
    fn drop(&mut self) {
        stop_process(self.0);
    }
}

#[test]
fn corrupt_session_daemon() {
    let ws = TempDir::new("dmd");
    let damaged = damage(&ws);
    let c = cairn::connect(daemon_options(&ws)).expect("daemon connect");
    let _stop = StopDaemon(c.status().unwrap().daemon.expect("daemon status").pid);
    corrupt_session_verify_and_repair(&ws, &damaged, &c);
    c.close().unwrap();
}

#[test]
fn repair_names_one_log() {
    let ws = TempDir::new("dmr");
    let c = embedded(&ws);
    c.save("s", &Change::append_messages([msg(0, 0)]), None)
        .unwrap();
    assert_eq!(
        code(c.repair(&RepairRequest::default())),
        ErrorCode::InvalidArgument
    );
    let both = RepairRequest {
        workflow_id: Some("w".into()),
        ..RepairRequest::session("s")
    };
    assert_eq!(code(c.repair(&both)), ErrorCode::InvalidArgument);
    // A healthy session has nothing to repair.
    assert_eq!(
        code(c.repair(&RepairRequest::session("s").apply(true))),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(c.repair(&RepairRequest::workflow("w"))),
        ErrorCode::NotFound
    );
    assert!(c.verify().unwrap().ok);
    c.close().unwrap();
}
