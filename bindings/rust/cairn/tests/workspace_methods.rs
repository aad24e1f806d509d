//! hello, changes, handoff, runtime.check, runtime.restart and the
//! processes of resumeSession, against a real libcairn in both modes.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use cairn::*;
use common::*;
use serde_json::json;

#[test]
fn workspace_methods_embedded() {
    let ws = TempDir::new("wme");
    let c = embedded(&ws);
    exercise_workspace_methods(&c, ws.path());
}

#[test]
fn workspace_methods_daemon() {
    let d = Daemon::start("wmd");
    exercise_workspace_methods(&d.client, d.ws.path());
}

/// Kills the process group a restart started, even when the test fails.
struct Group(i64);

impl Drop for Group {
    fn drop(&mut self) {
        if self.0 > 0 {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0)])
                .status();
        }
    }
}

fn process(name: &str, command: &[&str], health: &[&str]) -> Process {
    Process {
        name: name.into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        health_check: Some(HealthCheck {
            command: health.iter().map(|s| s.to_string()).collect(),
            ..HealthCheck::default()
        }),
        ..Process::default()
    }
}

fn state_of<'a>(ps: &'a [ProcessState], name: &str) -> &'a str {
    &ps.iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no process {name} in {ps:?}"))
        .state
}

fn exercise_workspace_methods(c: &Client, ws: &Path) {
    // hello: the served methods include the four this test covers.
    let h = c.hello().unwrap();
    assert_eq!(h.protocol_version, 1);
    assert!(h.pid > 0);
    assert!(h.capabilities.store.durable && h.capabilities.store.atomic_generations);
    for m in ["changes", "handoff", "runtime.check", "runtime.restart"] {
        assert!(
            h.capabilities.methods.iter().any(|x| x == m),
            "{m} missing from {:?}",
            h.capabilities.methods
        );
    }
    assert!(
        h.capabilities
            .events
            .iter()
            .any(|e| e == events::FILE_CHANGED)
    );
    if c.status().unwrap().mode == "daemon" {
        assert!(h.limits.max_message_size > 0);
    }

    // changes: a fresh instance first, then exactly what changed since.
    let first = c.changes(None).unwrap();
    assert!(first.fresh_instance);
    assert!(!first.clock.is_empty());
    std::fs::write(ws.join("notes.txt"), "one").unwrap();
    let next = c.changes(Some(&first.clock)).unwrap();
    assert!(!next.fresh_instance);
    assert_eq!(next.added, ["notes.txt"]);
    assert!(next.modified.is_empty() && next.deleted.is_empty());
    std::fs::remove_file(ws.join("notes.txt")).unwrap();
    let gone = c.changes(Some(&next.clock)).unwrap();
    assert_eq!(gone.deleted, ["notes.txt"]);
    assert_eq!(
        c.changes(Some("not a clock")).unwrap_err().code,
        ErrorCode::InvalidArgument
    );

    // A session whose runtime records two processes and a preview: "up"
    // is healthy already; "down" is healthy once its marker exists, which
    // only its command creates; until then its check exits 1 (unhealthy).
    let snap = Snapshot {
        messages: vec![json!({"role": "user", "content": "ship it"})],
        verifications: vec![Verification {
            id: "v1".into(),
            checks: vec![Check {
                name: "unit".into(),
                command: "cargo test".into(),
                status: "passed".into(),
                ..Check::default()
            }],
            ..Verification::default()
        }],
        handoff: Some(Handoff {
            done: vec!["parsed the input".into()],
            next_step: Some(NextStep {
                task: "write the docs".into(),
                done_when: "README says how".into(),
            }),
            ..Handoff::default()
        }),
        runtime: Some(Runtime {
            processes: vec![
                process("up", &["sleep", "60"], &["true"]),
                process(
                    "down",
                    &["sh", "-c", "touch down.ready && exec sleep 60"],
                    &["test", "-e", "down.ready"],
                ),
            ],
            previews: vec![Preview {
                url: "http://127.0.0.1:9/".into(),
                process: "up".into(),
            }],
        }),
        ..Snapshot::default()
    };
    let g = c.save("s", &snap, None).unwrap();

    // handoff: rendered from the latest generation; what it lacks listed.
    let ho = c.handoff("s").unwrap();
    assert_eq!(ho.session_id, "s");
    assert_eq!(ho.generation, g);
    assert!(ho.markdown.contains("write the docs"), "{}", ho.markdown);
    assert!(ho.markdown.contains("cargo test"), "{}", ho.markdown);
    assert!(!ho.complete);
    let keys: Vec<_> = ho.missing.iter().map(|m| m.key.as_str()).collect();
    assert!(keys.contains(&"reviewed_version"), "{keys:?}");
    assert!(!keys.contains(&"next_step"), "{keys:?}");
    assert!(ho.missing.iter().all(|m| !m.message.is_empty()));
    assert_eq!(c.handoff("nope").unwrap_err().code, ErrorCode::NotFound);

    // resumeSession probes the recorded processes and restarts nothing.
    let r = c.resume_session("s").unwrap();
    assert_eq!(r.processes.len(), 2, "{:?}", r.processes);
    assert_eq!(state_of(&r.processes, "up"), process_state::HEALTHY);
    assert_eq!(state_of(&r.processes, "down"), process_state::UNHEALTHY);
    assert!(!ws.join("down.ready").exists());

    // runtime.check: the same probe on demand, and the previews.
    let rc = c.runtime_check("s", Some(Duration::from_secs(5))).unwrap();
    assert_eq!(state_of(&rc.processes, "up"), process_state::HEALTHY);
    assert_eq!(state_of(&rc.processes, "down"), process_state::UNHEALTHY);
    assert!(
        !rc.processes
            .iter()
            .find(|p| p.name == "down")
            .unwrap()
            .detail
            .is_empty()
    );
    assert_eq!(
        rc.previews,
        [PreviewState {
            url: "http://127.0.0.1:9/".into(),
            process: "up".into(),
            state: process_state::HEALTHY.into(),
        }]
    );
    assert_eq!(
        c.runtime_check("nope", None).unwrap_err().code,
        ErrorCode::NotFound
    );

    // runtime.restart: a healthy process is left alone...
    let up = c.runtime_restart("s", "up", None).unwrap();
    assert_eq!(up.outcome, restart_outcome::ALREADY_HEALTHY);
    assert_eq!(up.pid, 0);
    // ...a down one is started in the workspace and proven healthy...
    let down = c
        .runtime_restart("s", "down", Some(Duration::from_secs(20)))
        .unwrap();
    let _group = Group(down.pid);
    assert_eq!(down.outcome, restart_outcome::STARTED, "{down:?}");
    assert_eq!(down.state, process_state::HEALTHY, "{down:?}");
    assert!(down.pid > 0 && alive(down.pid), "{down:?}");
    assert!(down.log.contains(".cairn"), "{down:?}");
    assert!(down.error.is_empty(), "{down:?}");
    assert!(ws.join("down.ready").exists());
    let rc = c.runtime_check("s", None).unwrap();
    assert_eq!(state_of(&rc.processes, "down"), process_state::HEALTHY);
    // ...and an unknown process is not_found.
    assert_eq!(
        c.runtime_restart("s", "nope", None).unwrap_err().code,
        ErrorCode::NotFound
    );
}
