//! Test helpers: temp workspaces and daemons that never outlive a test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cairn::{Client, Options, Result};

/// A temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        // Short names: the daemon's Unix socket path lives under the workspace.
        let p = std::env::temp_dir().join(format!(
            "crs-{tag}-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            nanos % 1_000_000
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn repo_build() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../build")
}

pub fn cairnd() -> PathBuf {
    match std::env::var_os("CAIRN_DAEMON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => repo_build().join("cairnd"),
    }
}

pub fn embedded(ws: &TempDir) -> Client {
    cairn::connect(Options::new(ws.path()).embedded(true)).expect("embedded connect")
}

pub fn daemon_options(ws: &TempDir) -> Options {
    Options::new(ws.path())
        .daemon(cairnd())
        .daemon_args(["--idle-timeout=20s"])
}

/// A daemon-mode client whose daemon is stopped (SIGTERM, then waited for)
/// when the fixture drops.
pub struct Daemon {
    pub client: Client,
    pub pid: i64,
    pub ws: TempDir,
}

impl Daemon {
    pub fn start(tag: &str) -> Daemon {
        Daemon::start_with(tag, &[])
    }

    pub fn start_with(tag: &str, extra_args: &[&str]) -> Daemon {
        let ws = TempDir::new(tag);
        let mut args = vec!["--idle-timeout=20s".to_string()];
        args.extend(extra_args.iter().map(|s| s.to_string()));
        let client = cairn::connect(Options::new(ws.path()).daemon(cairnd()).daemon_args(args))
            .expect("daemon connect");
        let st = client.status().expect("status");
        assert_eq!(st.mode, "daemon");
        let pid = st.daemon.expect("daemon status").pid;
        assert!(pid > 0);
        Daemon { client, pid, ws }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.client.close();
        stop_process(self.pid);
    }
}

/// Sends SIGTERM to pid and waits (bounded) until it is gone.
pub fn stop_process(pid: i64) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether pid exists and is not a zombie.
pub fn alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            // state follows the ")" that ends the command name
            let state = s
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | Some(Some('X')))
        }
        Err(_) => false,
    }
}

use cairn::*;
use serde_json::json;
use std::borrow::Cow;

/// Runs every method of the client once, checking the results. The
/// workspace must be empty.
pub fn exercise_all(c: &Client) {
    // status
    let st = c.status().unwrap();
    assert!(!st.version.is_empty());
    assert_eq!(st.version, cairn::version());
    assert_eq!(st.pid, i64::from(std::process::id()));

    // save: a whole snapshot, then a delta
    let bytes: Vec<u8> = (0..=255u8).collect();
    let mut snap = Snapshot {
        messages: vec![json!({"role": "user", "content": "héllo wörld 🌍 — 日本語"})],
        artifacts: vec![Artifact {
            name: "bin".into(),
            media_type: "application/octet-stream".into(),
            ..Artifact::with_bytes("a1", &bytes)
        }],
        handoff: Some(Handoff {
            done: vec!["parsed".into()],
            next_step: Some(NextStep {
                task: "write tests".into(),
                done_when: "cargo test passes".into(),
            }),
            ..Handoff::default()
        }),
        ..Snapshot::default()
    };
    snap.metadata.insert("ticket".into(), json!("T-1"));
    snap.agent.insert("model".into(), json!("m-1"));
    let g1 = c.save("s1", &snap, Some(0)).unwrap();
    assert_eq!(g1, 1);
    let mut change = Change::append_messages([json!({"role": "assistant", "content": "hi"})]);
    change.metadata = Some(serde_json::Map::from_iter([(
        "phase".to_string(),
        json!(2),
    )]));
    let g2 = c.save("s1", &change, Some(g1)).unwrap();
    assert_eq!(g2, 2);

    // resume_session
    let r = c.resume_session("s1").unwrap();
    assert_eq!(r.generation, 2);
    assert_eq!(r.snapshot.session_id, "s1");
    assert_eq!(r.snapshot.schema_version, 1);
    assert_eq!(r.snapshot.messages.len(), 2);
    assert_eq!(r.snapshot.messages[0], snap.messages[0]);
    assert_eq!(r.snapshot.metadata["ticket"], json!("T-1"));
    assert_eq!(r.snapshot.metadata["phase"], json!(2));
    assert_eq!(r.snapshot.agent["model"], json!("m-1"));
    assert_eq!(r.snapshot.artifacts.len(), 1);
    let art = &r.snapshot.artifacts[0];
    assert_eq!(art.bytes().unwrap().unwrap(), bytes);
    assert_eq!(art.size, 256);
    assert_eq!(art.sha256.len(), 64);
    assert_eq!(
        r.snapshot
            .handoff
            .as_ref()
            .unwrap()
            .next_step
            .as_ref()
            .unwrap()
            .task,
        "write tests"
    );
    assert!(r.interrupted_runs.is_empty());

    // runs
    let run = c.begin_run("s1", Some("r1")).unwrap();
    assert_eq!(run.run_id, "r1");
    let auto = c.begin_run("s1", None).unwrap();
    assert!(!auto.run_id.is_empty() && auto.run_id != "r1");
    let turn = [
        json!({"role": "assistant", "tool_call": "ls"}),
        json!({"role": "tool", "content": "a b"}),
    ];
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        total_tokens: 15,
        cost: 0.25,
    };
    let state = json!({"step": 1, "plan": ["a", "b"]});
    let cp = c
        .checkpoint(&CheckpointRequest {
            run_id: "r1".into(),
            turn: 1,
            new_messages: (&turn[..]).into(),
            usage,
            tool_calls_count: 1,
            state: Some(Cow::Borrowed(&state)),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(cp.message_count, 4);
    assert!(cp.generation > run.generation);
    let r = c.resume_session("s1").unwrap();
    let ir: Vec<_> = r
        .interrupted_runs
        .iter()
        .map(|r| (r.run_id.as_str(), r.turn, r.message_count))
        .collect();
    assert_eq!(ir, [("r1", 1, 4)]);
    assert_eq!(r.interrupted_runs[0].usage, usage);

    let rr = c.resume_run("r1", Some("s1"), Some("r2")).unwrap();
    assert_eq!(rr.run_id, "r2");
    assert_eq!(rr.resumed_from, "r1");
    assert_eq!(rr.session_id, "s1");
    assert_eq!(rr.messages.len(), 4);
    assert_eq!(rr.messages[2..], turn);
    assert_eq!(rr.turn, 1);
    assert_eq!(rr.usage, usage);
    assert_eq!(rr.tool_calls_count, 1);
    assert_eq!(rr.state.as_ref(), Some(&state));

    let final_usage = Usage {
        input_tokens: 20,
        output_tokens: 9,
        total_tokens: 29,
        cost: 0.5,
    };
    let g = c
        .complete_run(&CompleteRunRequest {
            run_id: "r2".into(),
            status: run_status::COMPLETED.into(),
            usage: Some(final_usage),
            tool_calls_count: Some(2),
            ..Default::default()
        })
        .unwrap();
    let r = c.resume_session("s1").unwrap();
    assert_eq!(r.generation, g);
    let r2 = r.snapshot.runs.iter().find(|r| r.run_id == "r2").unwrap();
    assert_eq!(r2.status, run_status::COMPLETED);
    assert_eq!(r2.parent_run_id, "r1");
    assert_eq!(r2.usage, final_usage);
    assert_eq!(r2.tool_calls_count, 2);
    assert!(r2.ended_at.is_some());
    c.complete_run(&CompleteRunRequest {
        run_id: (&auto.run_id).into(),
        status: run_status::FAILED.into(),
        ..Default::default()
    })
    .unwrap();

    // workflows
    let steps = [StepSpec::new("a", "ia"), StepSpec::new("b", "ib")];
    assert!(
        c.begin_workflow("w1", &steps, Some("s1"))
            .unwrap()
            .is_empty()
    );
    c.complete_step("w1", "a", "ia", Some(&json!({"ok": 1})), Some("s1"))
        .unwrap();
    let done = c.begin_workflow("w1", &steps, Some("s1")).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].step_id.as_str(), done[0].identity.as_str()),
        ("a", "ia")
    );
    assert_eq!(done[0].result, Some(json!({"ok": 1})));
    assert!(!done[0].completed_at.is_empty());
    c.finish_workflow("w1").unwrap();
    assert!(c.begin_workflow("w1", &steps, None).unwrap().is_empty());
    c.complete_step("w1", "b", "ib", None, None).unwrap();
    assert_eq!(
        c.begin_workflow("w1", &steps, None).unwrap()[0].result,
        None
    );
    c.finish_workflow("w1").unwrap();

    // fork
    let f = c.fork("s1", "s1-fork", Some(1)).unwrap();
    assert_eq!(f.session_id, "s1-fork");
    assert_eq!(
        c.resume_session("s1-fork").unwrap().snapshot.messages.len(),
        1
    );
    let f2 = c.fork("s1", "s1-latest", None).unwrap();
    assert_eq!(
        c.resume_session(&f2.session_id)
            .unwrap()
            .snapshot
            .messages
            .len(),
        4
    );

    // list
    let l = c.list_sessions().unwrap();
    let mut ids: Vec<_> = l
        .iter()
        .map(|s| (s.session_id.as_str(), s.message_count))
        .collect();
    ids.sort();
    assert_eq!(ids, [("s1", 4), ("s1-fork", 1), ("s1-latest", 4)]);
    let s1 = l.iter().find(|s| s.session_id == "s1").unwrap();
    assert_eq!(s1.runs.get("completed"), Some(&1));
    assert!(s1.size_bytes > 0);

    // export, delete, import
    let before = c.resume_session("s1").unwrap().snapshot;
    let env = c.export("s1").unwrap();
    assert!(env.is_object());
    c.delete("s1").unwrap();
    assert_eq!(
        c.resume_session("s1").unwrap_err().code,
        ErrorCode::NotFound
    );
    let imp = c.import(&env).unwrap();
    assert_eq!(imp.session_id, "s1");
    let after = c.resume_session("s1").unwrap().snapshot;
    assert_eq!(after.messages, before.messages);
    assert_eq!(after.artifacts, before.artifacts);
    assert_eq!(after.runs, before.runs);

    c.delete("s1-fork").unwrap();
    c.delete("s1-latest").unwrap();
    let ids: Vec<_> = c
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(ids, ["s1"]);
}

/// Runs f on a thread: its result and how long it took; fails the test
/// when it has not returned within limit (rather than hang).
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        let r = f();
        let _ = tx.send((r, start.elapsed()));
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => panic!("{what} still waiting after {limit:?}"),
    }
}

/// libcairn's message for a call of `method` whose bound (`within`, as Go
/// prints it: "400ms", "1s") passed with no answer.
pub fn no_answer(method: &str, within: &str) -> String {
    format!(
        "protocol: no answer to {method} from cairnd within {within}: the outcome is unknown \
         (a request that reached the daemon may still be carried out)"
    )
}

/// The variable that turns the binding's own checkpoint connection off.
pub const WIRE_ENV: &str = "CAIRN_RUST_WIRE";

/// Serializes the tests' changes of the environment and the connects that
/// read it.
pub fn env_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|p| p.into_inner())
}

/// cairn::connect(options) with CAIRN_RUST_WIRE (WIRE_ENV) set to value (None: unset).
pub fn connect_env(value: Option<&str>, options: Options) -> Result<Client> {
    let _g = env_lock();
    let old = std::env::var_os(WIRE_ENV);
    // SAFETY: every test of this binary that reads or writes the
    // environment holds env_lock.
    unsafe {
        match value {
            Some(v) => std::env::set_var(WIRE_ENV, v),
            None => std::env::remove_var(WIRE_ENV),
        }
    }
    let r = cairn::connect(options);
    // SAFETY: as above.
    unsafe {
        match old {
            Some(v) => std::env::set_var(WIRE_ENV, v),
            None => std::env::remove_var(WIRE_ENV),
        }
    }
    r
}

/// Sends sig ("-STOP", "-CONT", ...) to pid with kill(1).
pub fn signal(sig: &str, pid: i64) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// A daemon stopped with SIGSTOP until `cont` or the guard's drop (a
/// failing assertion included) sends SIGCONT.
pub struct Stopped {
    pid: i64,
    stopped: bool,
}

impl Stopped {
    /// Stops pid and returns once every one of its threads is stopped.
    /// kill(2) returns before that: the thread the kernel woke for the
    /// signal stops the others, which run on until it does, so a daemon on
    /// a busy machine can still answer a connection made just after kill
    /// returned.
    pub fn new(pid: i64) -> Stopped {
        signal("-STOP", pid);
        let guard = Stopped { pid, stopped: true };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !all_stopped(pid) {
            assert!(
                Instant::now() < deadline,
                "pid {pid}: not every thread stopped within 30 s of SIGSTOP"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        guard
    }

    pub fn cont(&mut self) {
        if std::mem::take(&mut self.stopped) {
            signal("-CONT", self.pid);
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if std::mem::take(&mut self.stopped) {
            let _ = Command::new("kill")
                .args(["-CONT", &self.pid.to_string()])
                .status();
        }
    }
}

/// Whether every thread of pid is stopped by a signal ('T' in
/// /proc/<pid>/task/<tid>/stat).
fn all_stopped(pid: i64) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks {
        let Ok(stat) = task.and_then(|t| std::fs::read(t.path().join("stat"))) else {
            return false;
        };
        // The state follows the parenthesised command name.
        let state = stat
            .iter()
            .rposition(|&b| b == b')')
            .and_then(|i| stat.get(i + 2));
        if state != Some(&b'T') {
            return false;
        }
        any = true;
    }
    any
}
