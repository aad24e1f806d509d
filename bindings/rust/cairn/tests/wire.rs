//! The native checkpoint path (src/wire.rs) against a real cairnd.
//!
//! Every test compares the path with libcairn's (a Client made with
//! CAIRN_RUST_WIRE=0) on the same daemon: results, errors (code and
//! message), stored bytes, and the request bytes themselves, captured on
//! the socket by a relaying proxy.

mod common;

use std::borrow::Cow;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::*;
use common::*;
use serde_json::{Value, json};

/// A daemon-mode Client with the native path on, whatever the environment
/// says.
fn nat(options: Options) -> Client {
    let c = connect_env(None, options).expect("connect");
    assert_eq!(c.wire_sent(), Some(0));
    c
}

/// A daemon-mode Client without the native path (libcairn only).
fn lib(options: Options) -> Client {
    let c = connect_env(Some("0"), options).expect("connect");
    assert_eq!(c.wire_sent(), None);
    c
}

fn sent(c: &Client) -> u64 {
    c.wire_sent().expect("the path is on")
}

/// Held for writing by a test that counts this process's descriptors,
/// for reading by every other test.
static SERIAL: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A workspace's daemon, started by a native client; every daemon pid
/// pushed on `pids` is stopped on drop.
struct Fixture {
    _serial: std::sync::RwLockReadGuard<'static, ()>,
    ws: TempDir,
    pids: Vec<i64>,
    args: Vec<String>,
}

impl Fixture {
    fn new(tag: &str, extra: &[&str]) -> Fixture {
        let mut args = vec!["--idle-timeout=20s".to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        Fixture {
            _serial: SERIAL.read().unwrap_or_else(|p| p.into_inner()),
            ws: TempDir::new(tag),
            pids: Vec::new(),
            args,
        }
    }

    fn options(&self) -> Options {
        Options::new(self.ws.path())
            .daemon(cairnd())
            .daemon_args(self.args.clone())
    }

    /// Records the pid of the daemon c talks to.
    fn track(&mut self, c: &Client) -> i64 {
        let pid = c.status().unwrap().daemon.unwrap().pid;
        if !self.pids.contains(&pid) {
            self.pids.push(pid);
        }
        pid
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for &p in &self.pids {
            stop_process(p);
        }
    }
}

/// Messages that test the JSON text's every corner: non-ASCII, control
/// characters, the line separators JSON allows raw, big and negative
/// numbers, nesting, empties, a large string.
fn odd_messages() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": "héllo 世界 🎉"}),
        json!({"c": "\u{0}\u{1}\u{1f}\u{7f} \u{2028}\u{2029} \"quoted\" back\\slash\n\t"}),
        json!([
            1,
            -1,
            i64::MAX,
            i64::MIN,
            u64::MAX,
            0.1,
            -0.0,
            1e300,
            5e-324,
            true,
            false,
            null
        ]),
        json!({"nested": {"a": [{"b": [[], {}]}]}, "": ""}),
        json!("a bare string"),
        json!(12345),
        Value::Null,
        json!({"k".repeat(300): "v".repeat(70_000)}),
    ]
}

fn req<'a>(
    run_id: &'a str,
    turn: i64,
    msgs: &'a [Value],
    usage: Usage,
    tool_calls_count: i64,
    state: Option<&'a Value>,
    session_id: Option<&'a str>,
) -> CheckpointRequest<'a> {
    CheckpointRequest {
        run_id: run_id.into(),
        session_id: session_id.map(Into::into),
        turn,
        new_messages: Cow::Borrowed(msgs),
        usage,
        tool_calls_count,
        state: state.map(Cow::Borrowed),
    }
}

fn usage(i: i64, o: i64, t: i64, cost: f64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        total_tokens: t,
        cost,
    }
}

/// Session "s" with a system message, and a run begun on it.
fn run_of(c: &Client) -> String {
    system(c, "s");
    c.begin_run("s", None).unwrap().run_id
}

/// A checkpoint of run `rid`'s turn `t` with one message `{"t": t}`.
fn tick(c: &Client, rid: &str, t: i64) -> Result<CheckpointResult> {
    c.checkpoint(&req(
        rid,
        t,
        &[json!({"t": t})],
        Usage::default(),
        0,
        None,
        None,
    ))
}

fn system(c: &Client, sid: &str) {
    c.save(
        sid,
        &Change::append_messages([json!({"role": "system", "content": "x"})]),
        None,
    )
    .unwrap();
}

/// The run's record and checkpoint as libcairn answers them, without their
/// time stamps, the ids `from` replaced by `to`.
fn run_record(c: &Client, run_id: &str, from: &str, to: &str) -> Value {
    let raw = c
        .call("run", json!({"run_id": run_id}).to_string().as_bytes())
        .unwrap();
    let text = String::from_utf8(raw).unwrap().replace(from, to);
    let mut v: Value = serde_json::from_str(&text).unwrap();
    for part in ["run", "checkpoint"] {
        if let Some(o) = v.get_mut(part).and_then(Value::as_object_mut) {
            for k in ["started_at", "created_at", "updated_at"] {
                o.remove(k);
            }
        }
    }
    v
}

#[test]
fn checkpoint_takes_the_path_and_matches_libcairn() {
    let mut f = Fixture::new("wmatch", &[]);
    let n = nat(f.options());
    f.track(&n);
    let l = lib(f.options());
    let odd = odd_messages();
    let mut results = Vec::new();
    for (c, sid) in [(&n, "s-nat"), (&l, "s-lib")] {
        system(c, sid);
        let rid = format!("r-{sid}");
        c.begin_run(sid, Some(&rid)).unwrap();
        let mut out = Vec::new();
        for turn in 1..=3i64 {
            let tool = [json!({"role": "tool", "turn": turn})];
            let msgs: &[Value] = if turn == 2 { &odd } else { &tool };
            let state = json!({"step": turn, "s": "é"});
            out.push(
                c.checkpoint(&req(
                    &rid,
                    turn,
                    msgs,
                    usage(turn, 2, 7, 0.25 * turn as f64),
                    turn * 3,
                    Some(&state),
                    None,
                ))
                .unwrap(),
            );
        }
        // session_id, no state, no messages, a state of null and of "".
        let null = Value::Null;
        let empty = json!("");
        out.push(
            c.checkpoint(&req(
                &rid,
                4,
                &[json!({"g": 1})],
                Usage::default(),
                0,
                None,
                Some(sid),
            ))
            .unwrap(),
        );
        out.push(
            c.checkpoint(&req(
                &rid,
                5,
                &[],
                usage(0, 0, 0, 3.0),
                1,
                Some(&null),
                Some(""),
            ))
            .unwrap(),
        );
        out.push(
            c.checkpoint(&req(&rid, 6, &[], Usage::default(), 1, Some(&empty), None))
                .unwrap(),
        );
        results.push(out);
    }
    assert_eq!(sent(&n), 6, "every call took the path");
    assert_eq!(results[0], results[1]);
    // What was stored is byte for byte the same: the messages, and the
    // runs' checkpoints (turn, usage, counts, state).
    let msgs = |sid: &str| {
        let raw = l
            .call(
                "messages",
                json!({"session_id": sid}).to_string().as_bytes(),
            )
            .unwrap();
        String::from_utf8(raw).unwrap()
    };
    assert_eq!(msgs("s-nat").replace("s-nat", "s-lib"), msgs("s-lib"));
    assert_eq!(
        run_record(&l, "r-s-nat", "s-nat", "s-lib"),
        run_record(&l, "r-s-lib", "s-lib", "s-lib")
    );
    let stored = n.messages("s-nat", &MessagesQuery::default()).unwrap();
    assert_eq!(stored.messages[2..2 + odd.len()], odd[..]);
}

/// (code, message), with the session limit's byte count (which varies with
/// the commit's time stamp) taken out.
fn outcome(
    r: Result<CheckpointResult>,
) -> std::result::Result<CheckpointResult, (ErrorCode, String)> {
    r.map_err(|e| {
        let mut m = e.message.clone();
        if let Some(i) = m.find(" of ") {
            if let Some(j) = m[i + 4..].find(" more") {
                if m[i + 4..i + 4 + j].bytes().all(|b| b.is_ascii_digit()) {
                    m.replace_range(i..i + 4 + j + 5, "");
                }
            }
        }
        (e.code, m)
    })
}

#[test]
fn errors_match_libcairn() {
    // A small session limit makes the daemon's too_large cheap, and a
    // small message limit libcairn's own.
    let mut f = Fixture::new(
        "werr",
        &["--max-session-bytes=200000", "--max-message-size=262144"],
    );
    let n = nat(f.options());
    f.track(&n);
    let l = lib(f.options());
    system(&n, "s");
    system(&n, "t");
    let m1 = [json!({"m": 1})];
    n.begin_run("s", Some("old")).unwrap();
    n.checkpoint(&req("old", 1, &m1, Usage::default(), 0, None, None))
        .unwrap();
    n.resume_run("old", None, Some("new")).unwrap();
    n.begin_run("s", Some("done")).unwrap();
    n.complete_run(&CompleteRunRequest {
        run_id: "done".into(),
        status: run_status::COMPLETED.into(),
        ..Default::default()
    })
    .unwrap();
    n.begin_run("s", Some("live")).unwrap();
    n.checkpoint(&req("live", 1, &m1, Usage::default(), 0, None, None))
        .unwrap();
    let before = sent(&n);
    let big: Vec<Value> = (0..4).map(|_| json!({"x": "y".repeat(60_000)})).collect();
    let huge = [json!({"x": "y".repeat(300_000)})];
    let m2 = [json!({"m": 2})];
    let long = "r".repeat(300);
    let d = Usage::default();
    let cases: Vec<(&str, CheckpointRequest<'_>, bool)> = vec![
        // (name, request, whether the native path sends it)
        ("unknown run", req("nope", 1, &[], d, 0, None, None), true),
        ("superseded run", req("old", 2, &m2, d, 0, None, None), true),
        ("ended run", req("done", 1, &[], d, 0, None, None), true),
        (
            "other session",
            req("live", 2, &[], d, 0, None, Some("t")),
            true,
        ),
        (
            "no such session",
            req("live", 2, &[], d, 0, None, Some("nope")),
            true,
        ),
        ("empty run id", req("", 1, &[], d, 0, None, None), true),
        ("long run id", req(&long, 1, &[], d, 0, None, None), true),
        ("nul in run id", req("a\0b", 1, &[], d, 0, None, None), true),
        (
            "negative turn",
            req("live", -1, &[], d, 0, None, None),
            true,
        ),
        (
            "session limit",
            req("live", 2, &big, d, 0, None, None),
            true,
        ),
        // libcairn decides these before (or instead of) sending:
        (
            "message limit",
            req("live", 2, &huge, d, 0, None, None),
            false,
        ),
    ];
    for (name, r, native) in &cases {
        let b = sent(&n);
        let got = outcome(n.checkpoint(r));
        let want = outcome(l.checkpoint(r));
        assert_eq!(got, want, "{name}");
        assert!(got.is_err(), "{name}: expected an error, got {got:?}");
        assert_eq!(sent(&n) - b, u64::from(*native), "{name}");
    }
    assert_eq!(sent(&n) - before, 10);
    // The connection goes on after every error.
    let b = sent(&n);
    assert_eq!(
        n.checkpoint(&req("live", 2, &m2, d, 0, None, None))
            .unwrap()
            .message_count,
        4
    );
    assert_eq!(sent(&n), b + 1);
}

#[test]
fn odd_params_go_through_libcairn() {
    let mut f = Fixture::new("wodd", &[]);
    let n = nat(f.options());
    f.track(&n);
    let l = lib(f.options());
    for c in [&n, &l] {
        let sid = if c.wire_sent().is_some() {
            "s-nat"
        } else {
            "s-lib"
        };
        system(c, sid);
        c.begin_run(sid, Some(&format!("r-{sid}"))).unwrap();
    }
    // A NaN or infinite cost: serde_json writes null, which libcairn takes
    // as a cost of 0. The path leaves it to libcairn.
    for (turn, cost) in [(1, f64::NAN), (2, f64::INFINITY), (3, f64::NEG_INFINITY)] {
        let a = n.checkpoint(&req(
            "r-s-nat",
            turn,
            &[json!({"t": turn})],
            usage(1, 1, 1, cost),
            0,
            None,
            None,
        ));
        let b = l.checkpoint(&req(
            "r-s-lib",
            turn,
            &[json!({"t": turn})],
            usage(1, 1, 1, cost),
            0,
            None,
            None,
        ));
        assert_eq!(outcome(a), outcome(b), "cost {cost}");
        assert_eq!(sent(&n), 0, "cost {cost}");
    }
    assert_eq!(
        run_record(&l, "r-s-nat", "s-nat", "s-lib"),
        run_record(&l, "r-s-lib", "s-lib", "s-lib")
    );
    // Another thread's call in progress on the connection: libcairn.
    let m = [json!({"t": 4})];
    {
        let _held = n.wire_hold().expect("the path is on and idle");
        let r = n.checkpoint(&req("r-s-nat", 4, &m, Usage::default(), 0, None, None));
        assert_eq!(r.unwrap().message_count, 5);
        assert_eq!(sent(&n), 0);
    }
    let m = [json!({"t": 5})];
    let r = n.checkpoint(&req("r-s-nat", 5, &m, Usage::default(), 0, None, None));
    assert_eq!(r.unwrap().message_count, 6);
    assert_eq!(sent(&n), 1);
}

#[test]
fn env_turns_the_path_off_and_embedded_has_none() {
    let mut f = Fixture::new("wenv", &[]);
    for v in ["0", "off", "false", "no", " 0 "] {
        let c = connect_env(Some(v), f.options()).unwrap();
        f.track(&c);
        assert_eq!(c.wire_sent(), None, "{v:?}");
        let rid = run_of(&c);
        c.checkpoint(&req(&rid, 1, &[json!({})], Usage::default(), 0, None, None))
            .unwrap();
        c.close().unwrap();
    }
    for v in [None, Some("1"), Some("")] {
        let c = connect_env(v, f.options()).unwrap();
        assert_eq!(c.wire_sent(), Some(0), "{v:?}");
        let rid = c.begin_run("s", None).unwrap().run_id;
        c.checkpoint(&req(&rid, 1, &[json!({})], Usage::default(), 0, None, None))
            .unwrap();
        assert_eq!(c.wire_sent(), Some(1), "{v:?}");
    }
    for p in f.pids.drain(..) {
        stop_process(p);
    }
    let e = connect_env(None, Options::new(f.ws.path()).embedded(true)).unwrap();
    assert_eq!(e.wire_sent(), None);
}

#[test]
fn daemon_killed_between_checkpoints() {
    let mut f = Fixture::new("wkill", &[]);
    let c = nat(f.options());
    let first = f.track(&c);
    let rid = run_of(&c);
    let ck = |turn: i64| tick(&c, &rid, turn).map(|r| r.message_count);
    assert_eq!(ck(1).unwrap(), 2);
    assert_eq!(sent(&c), 1);
    Command::kill9(first, f.ws.path());
    f.pids.retain(|&p| p != first);
    // The native connection is dead and no daemon answers: libcairn takes
    // the call and starts a new daemon (or, when its own connection has
    // not seen the kill yet, sends it again on a new connection).
    assert_eq!(ck(2).unwrap(), 3);
    assert_eq!(sent(&c), 1);
    let second = f.track(&c);
    assert_ne!(first, second);
    // Then the path dials the new daemon.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ck(3).unwrap(), 4);
    assert_eq!(sent(&c), 2);
    // Killed again, right after a native call: the same.
    Command::kill9(second, f.ws.path());
    f.pids.retain(|&p| p != second);
    assert_eq!(ck(4).unwrap(), 5);
    let third = f.track(&c);
    assert_ne!(third, second);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ck(5).unwrap(), 6);
    assert_eq!(sent(&c), 3);
    let ts: Vec<_> = c
        .messages("s", &MessagesQuery::default())
        .unwrap()
        .messages
        .iter()
        .map(|m| m.get("t").cloned())
        .collect();
    assert_eq!(
        ts,
        [
            None,
            Some(json!(1)),
            Some(json!(2)),
            Some(json!(3)),
            Some(json!(4)),
            Some(json!(5))
        ]
    );
}

struct Command;

impl Command {
    /// SIGKILL, then waits until pid is gone and its socket refuses
    /// connections: a Go process's main thread shows as a zombie while
    /// other threads still hold its files open.
    fn kill9(pid: i64, ws: &Path) {
        std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            assert!(Instant::now() < deadline, "pid {pid} still there");
            std::thread::sleep(Duration::from_millis(5));
        }
        let sock = daemon_socket(ws);
        while UnixStream::connect(&sock).is_ok() {
            assert!(
                Instant::now() < deadline,
                "{} still accepts",
                sock.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn threads_share_one_client() {
    let mut f = Fixture::new("wthr", &[]);
    let c = nat(f.options());
    f.track(&c);
    let (threads, turns) = (8usize, 25i64);
    let runs: Vec<String> = (0..threads)
        .map(|i| {
            system(&c, &format!("s{i}"));
            c.begin_run(&format!("s{i}"), None).unwrap().run_id
        })
        .collect();
    std::thread::scope(|s| {
        for (i, rid) in runs.iter().enumerate() {
            let c = &c;
            s.spawn(move || {
                for t in 1..=turns {
                    let m = [json!({"i": i, "t": t})];
                    let r = c
                        .checkpoint(&req(rid, t, &m, usage(t, 0, 0, 0.0), t, None, None))
                        .unwrap();
                    assert_eq!(r.message_count, t + 1);
                }
            });
        }
    });
    for i in 0..threads {
        let ts: Vec<_> = c
            .messages(&format!("s{i}"), &MessagesQuery::default())
            .unwrap()
            .messages[1..]
            .iter()
            .map(|m| m["t"].as_i64().unwrap())
            .collect();
        assert_eq!(ts, (1..=turns).collect::<Vec<_>>());
    }
    // Some went natively; a call finding another in progress used libcairn.
    let s = sent(&c);
    assert!(s > 0 && s <= threads as u64 * turns as u64, "{s}");
}

#[test]
fn close_releases_the_connection() {
    let _alone = SERIAL.write().unwrap_or_else(|p| p.into_inner());
    let ws = TempDir::new("wclose");
    let c = nat(Options::new(ws.path())
        .daemon(cairnd())
        .daemon_args(["--idle-timeout=20s"]));
    let pid = c.status().unwrap().daemon.unwrap().pid;
    let _stop = StopOnDrop(pid);
    let rid = run_of(&c);
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    c.checkpoint(&req(&rid, 1, &[], Usage::default(), 0, None, None))
        .unwrap();
    assert_eq!(sent(&c), 1);
    assert_eq!(fds(), before + 1);
    let l = lib(Options::new(ws.path()).auto_start(false));
    l.close().unwrap();
    c.close().unwrap();
    // libcairn's connection and ours are gone.
    assert_eq!(fds(), before - 1);
    let a = c
        .checkpoint(&req(&rid, 2, &[], Usage::default(), 0, None, None))
        .unwrap_err();
    let b = l
        .checkpoint(&req(&rid, 2, &[], Usage::default(), 0, None, None))
        .unwrap_err();
    assert_eq!((a.code.clone(), a.message), (b.code, b.message));
    assert_eq!(a.code, ErrorCode::BadHandle);
    assert_eq!(sent(&c), 1);
}

struct StopOnDrop(i64);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        stop_process(self.0);
    }
}

// -- the request bytes, as libcairn sends them ------------------------------

/// A Unix socket that relays every connection to `target` and records what
/// each client sent.
struct Relay {
    path: PathBuf,
    streams: Arc<Mutex<Vec<Shared>>>,
    /// When set, the relay drops the next answer the daemon sends and
    /// closes that connection both ways (then clears itself).
    cut: Arc<AtomicBool>,
    /// While set, the relay drops what the daemon sends (what `inject`
    /// sends still goes through).
    mute: Arc<AtomicBool>,
    socks: Arc<Mutex<Vec<UnixStream>>>,
    /// While set, the relay reads what clients send only every SLOW_PAUSE
    /// (then all that waits), as a daemon slow to read would.
    slow: Arc<AtomicBool>,
    /// Each connection's record, relay end of the client's socket, and
    /// whether its end is to be hidden from the daemon (refuse_writes).
    clients: Arc<Mutex<Vec<RelayClient>>>,
    stop: Arc<AtomicBool>,
}

/// Bytes one thread records and another reads.
type Shared = Arc<Mutex<Vec<u8>>>;

type RelayClient = (Shared, UnixStream, Arc<AtomicBool>);

impl Relay {
    fn new(path: PathBuf, target: PathBuf) -> Relay {
        let ln = UnixListener::bind(&path).unwrap();
        let r = Relay {
            path,
            streams: Arc::default(),
            cut: Arc::default(),
            mute: Arc::default(),
            socks: Arc::default(),
            slow: Arc::default(),
            clients: Arc::default(),
            stop: Arc::default(),
        };
        let (streams, cut, mute, socks, slow, stop) = (
            r.streams.clone(),
            r.cut.clone(),
            r.mute.clone(),
            r.socks.clone(),
            r.slow.clone(),
            r.stop.clone(),
        );
        let clients = r.clients.clone();
        std::thread::spawn(move || {
            for a in ln.incoming() {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(a) = a else { return };
                let b = UnixStream::connect(&target).unwrap();
                let rec = Arc::new(Mutex::new(Vec::new()));
                streams.lock().unwrap().push(rec.clone());
                {
                    let mut s = socks.lock().unwrap();
                    s.push(a.try_clone().unwrap());
                    s.push(b.try_clone().unwrap());
                }
                let frozen = Arc::new(AtomicBool::new(false));
                clients
                    .lock()
                    .unwrap()
                    .push((rec.clone(), a.try_clone().unwrap(), frozen.clone()));
                let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
                let slow = slow.clone();
                std::thread::spawn(move || pump(a, b, Some((rec, frozen)), None, None, Some(slow)));
                let (cut, mute) = (cut.clone(), mute.clone());
                std::thread::spawn(move || pump(b2, a2, None, Some(cut), Some(mute), None));
            }
        });
        r
    }

    /// The relay's end of the newest connection that is not libcairn's
    /// (whose upgrade request names Go's HTTP client) and its frozen flag.
    fn native(&self) -> (UnixStream, Arc<AtomicBool>) {
        let cs = self.clients.lock().unwrap();
        let (_, a, frozen) = cs
            .iter()
            .rev()
            .find(|(rec, _, _)| {
                let rec = rec.lock().unwrap();
                !rec.windows(14).any(|w| w == b"Go-http-client")
            })
            .expect("a native connection");
        (a.try_clone().unwrap(), frozen.clone())
    }

    /// What the newest native connection's client has sent so far.
    fn native_sent(&self) -> Vec<u8> {
        let cs = self.clients.lock().unwrap();
        cs.iter()
            .rev()
            .map(|(rec, _, _)| rec.lock().unwrap())
            .find(|rec| !rec.windows(14).any(|w| w == b"Go-http-client"))
            .expect("a native connection")
            .clone()
    }

    /// Sends frame to the native client as if the daemon had.
    fn inject(&self, frame: &[u8]) {
        self.native().0.write_all(frame).unwrap();
    }

    /// Makes the native client's sends fail (EPIPE), as a connection the
    /// daemon stopped reading does, without the daemon seeing an end.
    fn refuse_writes(&self) {
        let (a, frozen) = self.native();
        frozen.store(true, Ordering::Release);
        a.shutdown(std::net::Shutdown::Read).unwrap();
    }

    /// Each connection's client pong payloads, unmasked.
    fn pongs(&self) -> Vec<Vec<Vec<u8>>> {
        let streams: Vec<Vec<u8>> = self
            .streams
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.lock().unwrap().clone())
            .collect();
        streams.iter().map(|s| client_frames(s, true)).collect()
    }

    /// Each connection's client messages, unmasked.
    fn messages(&self) -> Vec<Vec<Vec<u8>>> {
        let streams: Vec<Vec<u8>> = self
            .streams
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.lock().unwrap().clone())
            .collect();
        streams.iter().map(|s| client_frames(s, false)).collect()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = UnixStream::connect(&self.path); // wakes the accept
        for s in self.socks.lock().unwrap().iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

type Record = (Arc<Mutex<Vec<u8>>>, Arc<AtomicBool>);

/// How long a slow relay leaves what clients send unread between reads.
const SLOW_PAUSE: Duration = Duration::from_millis(100);

fn pump(
    mut src: UnixStream,
    mut dst: UnixStream,
    rec: Option<Record>,
    cut: Option<Arc<AtomicBool>>,
    mute: Option<Arc<AtomicBool>>,
    slow: Option<Arc<AtomicBool>>,
) {
    // More than a socket's buffer holds: a slow relay's read takes all
    // that waits, which wakes a writer blocked on the full buffer.
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if slow.as_ref().is_some_and(|s| s.load(Ordering::Acquire)) {
            std::thread::sleep(SLOW_PAUSE);
        }
        let n = match src.read(&mut buf) {
            Ok(0) | Err(_) => {
                if rec
                    .as_ref()
                    .is_some_and(|(_, frozen)| frozen.load(Ordering::Acquire))
                {
                    return; // the daemon must not see the end
                }
                let _ = dst.shutdown(std::net::Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        if let Some(cut) = &cut {
            if cut.swap(false, Ordering::AcqRel) {
                let _ = src.shutdown(std::net::Shutdown::Both);
                let _ = dst.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
        if mute.as_ref().is_some_and(|m| m.load(Ordering::Acquire)) {
            continue;
        }
        if let Some((rec, _)) = &rec {
            rec.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        if dst.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// The data messages (or, pongs: the pong payloads) a client sent on one
/// connection, unmasked.
fn client_frames(s: &[u8], pongs: bool) -> Vec<Vec<u8>> {
    let Some(h) = s.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Vec::new();
    };
    let mut i = h + 4;
    let (mut msgs, mut parts) = (Vec::new(), Vec::new());
    while i + 2 <= s.len() {
        let (b0, b1) = (s[i], s[i + 1]);
        assert!(b1 & 0x80 != 0, "a client frame must be masked");
        let mut n = (b1 & 0x7f) as usize;
        i += 2;
        if n == 126 {
            n = u16::from_be_bytes([s[i], s[i + 1]]) as usize;
            i += 2;
        } else if n == 127 {
            n = u64::from_be_bytes(s[i..i + 8].try_into().unwrap()) as usize;
            i += 8;
        }
        if i + 4 + n > s.len() {
            break; // a frame still arriving
        }
        let key = &s[i..i + 4];
        i += 4;
        let payload: Vec<u8> = s[i..i + n]
            .iter()
            .enumerate()
            .map(|(j, x)| x ^ key[j % 4])
            .collect();
        i += n;
        if pongs {
            if b0 & 0x0f == 10 {
                msgs.push(payload);
            }
        } else if matches!(b0 & 0x0f, 0..=2) {
            parts.extend_from_slice(&payload);
            if b0 & 0x80 != 0 {
                msgs.push(std::mem::take(&mut parts));
            }
        }
    }
    msgs
}

/// A checkpoint request's params (the CBOR after its "params" key), None
/// for another message. A request is {id, method, params}, in that order,
/// as both clients encode it.
fn checkpoint_params(msg: &[u8]) -> Option<Vec<u8>> {
    let marker = b"\x66method\x6acheckpoint\x66params";
    let i = msg.windows(marker.len()).position(|w| w == marker)?;
    Some(msg[i + marker.len()..].to_vec())
}

/// The daemon socket of ws (PROTOCOL.md §1).
fn daemon_socket(ws: &Path) -> PathBuf {
    let d = std::fs::canonicalize(ws).unwrap().join(".cairn");
    match std::fs::read_to_string(d.join("cairnd.addr")) {
        Ok(s) => PathBuf::from(s.trim()),
        Err(_) => d.join("cairnd.sock"),
    }
}

/// (srv, relay, front): srv a client of the fixture's daemon; relay a Relay
/// to that daemon; front a workspace whose clients dial the relay (its
/// cairnd.addr names the relay's socket).
fn relayed(f: &mut Fixture) -> (Client, Relay, TempDir) {
    let srv = nat(f.options());
    f.track(&srv);
    let dir = TempDir::new("wrly");
    let relay = Relay::new(dir.path().join("r.sock"), daemon_socket(f.ws.path()));
    std::fs::create_dir_all(dir.path().join("front/.cairn")).unwrap();
    std::fs::write(
        dir.path().join("front/.cairn/cairnd.addr"),
        format!("{}\n", relay.path.display()),
    )
    .unwrap();
    (srv, relay, dir)
}

/// The options of a client of `relayed`'s front workspace (the relay's
/// socket), which never starts a daemon of its own.
fn front(dir: &TempDir) -> Options {
    Options::new(dir.path().join("front")).auto_start(false)
}

#[test]
fn request_bytes_equal_libcairn() {
    let mut f = Fixture::new("wbytes", &[]);
    let (srv, relay, dir) = relayed(&mut f);
    let n = nat(front(&dir));
    let l = lib(front(&dir));
    let odd = odd_messages();
    let thirty: Vec<Value> = (0..30).map(|_| json!({"a": "b".repeat(200)})).collect();
    let many: Vec<Value> = (0..25).map(|i| json!({"c": i})).collect();
    let state1 = json!({"s": ["é", 1.5]});
    let state2 = json!("state text");
    let state3 = json!(0);
    let edges: Vec<Value> = [21, 22, 253, 254, 65533, 65534]
        .iter()
        .map(|&n| json!("x".repeat(n)))
        .collect();
    let mut made: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (c, sid) in [(&n, "s-nat"), (&l, "s-lib")] {
        system(&srv, sid);
        let rid = format!("r{sid}");
        srv.begin_run(sid, Some(&rid)).unwrap();
        let calls = [
            req(&rid, 1, &[], Usage::default(), 0, None, None),
            req(
                &rid,
                2,
                &odd,
                usage(10, 1 << 40, -3, 1.1),
                1 << 62,
                Some(&state1),
                Some(sid),
            ),
            req(
                &rid,
                300,
                &thirty,
                usage(0, 0, 0, 7.0),
                70000,
                Some(&state2),
                None,
            ),
            req(
                &rid,
                1 << 33,
                &many,
                usage(1 << 32, 0, 0, -0.0),
                24,
                Some(&state3),
                Some(""),
            ),
            // Every length class of a CBOR head at its edges: JSON texts
            // of 23, 24, 255, 256, 65535 and 65536 bytes, and ints.
            req(
                &rid,
                (1 << 33) + 1,
                &edges,
                usage(255, 65535, -25, 1e-310),
                i64::MAX,
                Some(&Value::Null),
                None,
            ),
            req(
                &rid,
                (1 << 33) + 2,
                &[],
                usage(256, 65536, -24, 0.0),
                23,
                None,
                None,
            ),
            req(
                &rid,
                (1 << 33) + 3,
                &[],
                usage(24, 1 << 32, -257, 0.0),
                (1 << 32) - 1,
                None,
                None,
            ),
        ];
        let mut want = Vec::new();
        for r in &calls {
            c.checkpoint(r).unwrap();
            want.push(wire_checkpoint_params(r).expect("encodable"));
        }
        made.push((rid, want));
    }
    assert_eq!(sent(&n), 7);
    let mut got: Vec<Vec<Vec<u8>>> = relay
        .messages()
        .into_iter()
        .map(|msgs| {
            msgs.iter()
                .filter_map(|m| checkpoint_params(m))
                .collect::<Vec<_>>()
        })
        .filter(|ps| !ps.is_empty())
        .collect();
    assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), [7, 7]);
    // What each client sent is what the path's encoder makes of its calls:
    // the path's bytes and libcairn's Go encoder's are the same.
    for (rid, want) in &made {
        let needle = rid.as_bytes();
        let k = got
            .iter()
            .position(|ps| ps[0].windows(needle.len()).any(|w| w == needle))
            .unwrap();
        let ps = got.remove(k);
        for (i, (p, w)) in ps.iter().zip(want).enumerate() {
            assert!(p == w, "{rid} call {i}: the bytes differ");
        }
    }
}

#[test]
fn connection_lost_after_the_request_was_sent() {
    let mut f = Fixture::new("wlost", &[]);
    let (srv, relay, dir) = relayed(&mut f);
    let n = nat(front(&dir));
    let l = lib(front(&dir));
    let mut errs = Vec::new();
    for (c, sid) in [(&n, "s-nat"), (&l, "s-lib")] {
        system(&srv, sid);
        let rid = srv.begin_run(sid, None).unwrap().run_id;
        let ck = |t: i64| tick(c, &rid, t);
        ck(1).unwrap();
        relay.cut.store(true, Ordering::Release);
        errs.push(ck(2).unwrap_err());
        assert!(!relay.cut.load(Ordering::Acquire));
        // The daemon had the request: it committed it.
        let ts: Vec<_> = srv
            .messages(sid, &MessagesQuery::default())
            .unwrap()
            .messages
            .iter()
            .map(|m| m.get("t").cloned())
            .collect();
        assert_eq!(ts, [None, Some(json!(1)), Some(json!(2))]);
        assert_eq!(ck(3).unwrap().message_count, 4);
    }
    assert_eq!(sent(&n), 3);
    for e in &errs {
        assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
        assert!(e.message.starts_with("protocol: connection lost: "), "{e}");
    }
}

/// Session "s" with a run, made through srv, checkpointed once through
/// nat's native path: the run id.
fn first_checkpoint(srv: &Client, n: &Client) -> String {
    system(srv, "s");
    let rid = srv.begin_run("s", None).unwrap().run_id;
    n.checkpoint(&req(
        &rid,
        1,
        &[json!({"t": 1})],
        Usage::default(),
        0,
        None,
        None,
    ))
    .unwrap();
    assert_eq!(sent(n), 1);
    rid
}

fn stored_turns(c: &Client) -> Vec<Option<Value>> {
    c.messages("s", &MessagesQuery::default())
        .unwrap()
        .messages
        .iter()
        .map(|m| m.get("t").cloned())
        .collect()
}

fn native_connections(relay: &Relay) -> usize {
    relay
        .clients
        .lock()
        .unwrap()
        .iter()
        .filter(|(rec, _, _)| {
            !rec.lock()
                .unwrap()
                .windows(14)
                .any(|w| w == b"Go-http-client")
        })
        .count()
}

#[test]
fn frames_between_calls() {
    // What arrives between two calls is read before the next request is
    // sent: a ping is answered with its pong, and a close frame (a daemon
    // going away) makes the call dial again instead of sending on a
    // connection the daemon has given up.
    let mut f = Fixture::new("wfrm", &[]);
    let (srv, relay, dir) = relayed(&mut f);
    let n = nat(front(&dir));
    let rid = first_checkpoint(&srv, &n);
    let ck = |t: i64| tick(&n, &rid, t).unwrap().message_count;
    relay.inject(b"\x89\x04ping");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ck(2), 3);
    assert_eq!((sent(&n), native_connections(&relay)), (2, 1));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !relay.pongs().iter().any(|p| p == &[b"ping".to_vec()]) {
        assert!(Instant::now() < deadline, "no pong");
        std::thread::sleep(Duration::from_millis(10));
    }
    // A close frame, the socket left open: the next call redials.
    relay.inject(b"\x88\x02\x03\xe9");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ck(3), 4);
    assert_eq!((sent(&n), native_connections(&relay)), (3, 2));
    assert_eq!(
        stored_turns(&srv),
        [None, Some(json!(1)), Some(json!(2)), Some(json!(3))]
    );
}

#[test]
fn send_failure_goes_through_libcairn() {
    // A request that could not be sent was not made: the call goes
    // through libcairn, and the next one dials a new connection.
    let mut f = Fixture::new("wsend", &[]);
    let (srv, relay, dir) = relayed(&mut f);
    let n = nat(front(&dir));
    let rid = first_checkpoint(&srv, &n);
    let ck = |t: i64| tick(&n, &rid, t).unwrap().message_count;
    relay.refuse_writes();
    assert_eq!(ck(2), 3);
    assert_eq!((sent(&n), native_connections(&relay)), (1, 1));
    assert_eq!(ck(3), 4);
    assert_eq!((sent(&n), native_connections(&relay)), (2, 2));
    assert_eq!(
        stored_turns(&srv),
        [None, Some(json!(1)), Some(json!(2)), Some(json!(3))]
    );
}

/// The call timeout of the client whose big checkpoint a slow relay
/// holds up. The relay reads far more often than that (SLOW_PAUSE), but
/// only what the socket's buffer holds each time, so the request would
/// take seconds: SO_SNDTIMEO, which bounds each wait for room and not the
/// write(2), would let one write(2) go on for all of it. Only a bound on
/// the whole write ends the call, after about one bound.
const SLOW_BOUND: Duration = Duration::from_millis(500);

#[test]
fn a_call_timeout_bounds_the_whole_write() {
    // With a call timeout, a daemon that reads a request slowly cannot
    // stretch its write past the bound: the bound covers the whole write,
    // not each write(2) nor each wait for room. At the relay's pace the
    // request would take seconds. The cut request is
    // neither counted as sent nor handed to libcairn (which would wait
    // again), and the daemon drops its partial frame.
    let mut f = Fixture::new("wslow", &[]);
    let (srv, relay, dir) = relayed(&mut f);
    let n = Arc::new(nat(front(&dir).call_timeout(SLOW_BOUND)));
    let rid = first_checkpoint(&srv, &n);
    let before = relay.native_sent().len();
    relay.slow.store(true, Ordering::Release);
    let (c, r) = (n.clone(), rid.clone());
    let m = [json!({"t": 2, "pad": "x".repeat(8 << 20)})];
    let (res, took) = within(
        Duration::from_secs(5),
        "a big checkpoint through a slow relay",
        move || c.checkpoint(&req(&r, 2, &m, Usage::default(), 0, None, None)),
    );
    relay.slow.store(false, Ordering::Release);
    let e = res.expect_err("a big checkpoint through a slow relay");
    assert_eq!(e.code, ErrorCode::Unavailable, "{e}");
    assert_eq!(e.message, no_answer("checkpoint", "500ms"));
    assert!(took >= SLOW_BOUND, "gave up after {took:?}");
    assert_eq!(sent(&n), 1, "a request not written whole is not counted");
    assert_eq!(
        n.wire_handed(),
        Some(0),
        "the cut checkpoint went to libcairn"
    );
    // Part of the request reached the daemon, never all of it. (The relay
    // records what it reads on its own thread, which a busy machine may
    // not have run yet when the call gives up.)
    let by = Instant::now() + Duration::from_secs(5);
    let mut got = relay.native_sent();
    while got.len() <= before && Instant::now() < by {
        std::thread::sleep(Duration::from_millis(10));
        got = relay.native_sent();
    }
    assert!(got.len() > before, "nothing of the big request was relayed");
    assert_eq!(client_frames(&got, false).len(), 2, "hello, checkpoint 1");
    // The next call dials again and works; the cut request is not stored.
    assert_eq!(tick(&n, &rid, 3).unwrap().message_count, 3);
    assert_eq!(sent(&n), 2);
    assert_eq!(stored_turns(&srv), [None, Some(json!(1)), Some(json!(3))]);
}

#[test]
fn message_limit_from_hello() {
    // The path adopts a daemon's lower message limit (hello), so it never
    // sends what the daemon would close the connection for.
    let mut f = Fixture::new("whello", &["--max-message-size=8192"]);
    let c = nat(f.options());
    f.track(&c);
    let rid = run_of(&c);
    let ck = |t: i64, m: Value| c.checkpoint(&req(&rid, t, &[m], Usage::default(), 0, None, None));
    ck(1, json!({"x": "y".repeat(1000)})).unwrap();
    assert_eq!(sent(&c), 1);
    let e = ck(2, json!({"x": "y".repeat(9000)})).unwrap_err();
    assert_eq!(e.code, ErrorCode::TooLarge, "{e}");
    assert_eq!(sent(&c), 1);
    ck(2, json!({"x": "z"})).unwrap();
    assert_eq!(sent(&c), 2);
}

#[test]
fn symlinked_workspace() {
    // The path dials the daemon of the workspace libcairn resolved, named
    // through a symlink.
    let mut f = Fixture::new("wlink", &[]);
    let srv = nat(f.options());
    f.track(&srv);
    let rid = run_of(&srv);
    let dir = TempDir::new("wlnk");
    let link = dir.path().join("ws");
    std::os::unix::fs::symlink(f.ws.path(), &link).unwrap();
    let c = nat(Options::new(&link).auto_start(false));
    c.checkpoint(&req(
        &rid,
        1,
        &[json!({"t": 1})],
        Usage::default(),
        0,
        None,
        None,
    ))
    .unwrap();
    assert_eq!(sent(&c), 1);
    assert_eq!(stored_turns(&srv), [None, Some(json!(1))]);
}

unsafe extern "C" {
    fn fork() -> i32;
    fn _exit(code: i32) -> !;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn fork_child_never_uses_the_parents_connection() {
    // Alone: the child of a fork() must not find another test's thread
    // holding a lock it needs.
    let _alone = SERIAL.write().unwrap_or_else(|p| p.into_inner());
    let ws = TempDir::new("wfork");
    let c = nat(Options::new(ws.path())
        .daemon(cairnd())
        .daemon_args(["--idle-timeout=20s"]));
    let _stop = StopOnDrop(c.status().unwrap().daemon.unwrap().pid);
    let rid = run_of(&c);
    let m1 = [json!({"t": 1})];
    c.checkpoint(&req(&rid, 1, &m1, Usage::default(), 0, None, None))
        .unwrap();
    assert_eq!(sent(&c), 1);
    let (mut rd, mut wr) = UnixStream::pair().unwrap();
    let child = [json!({"t": "child"})];
    let r = req(&rid, 2, &child, Usage::default(), 0, None, None);
    // SAFETY: the child only calls checkpoint (which libcairn answers with
    // forked), writes to a socket and exits with _exit.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match c.checkpoint(&r) {
            Err(e) if e.code == ErrorCode::Forked => 0,
            _ => 2,
        };
        let _ = wr.write_all(&sent(&c).to_le_bytes());
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { _exit(code) };
    }
    drop(wr);
    // Bounded: a child stuck in a lock taken before the fork is killed.
    let mut status = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // SAFETY: pid is our child; status is valid; 1 is WNOHANG.
        let r = unsafe { waitpid(pid, &mut status, 1) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "waitpid failed");
        if Instant::now() > deadline {
            // SAFETY: pid is our child; 9 is SIGKILL.
            unsafe { kill(pid, 9) };
            // SAFETY: as above; reaps the killed child.
            unsafe { waitpid(pid, &mut status, 0) };
            panic!("the forked child did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut child_sent = [0u8; 8];
    rd.read_exact(&mut child_sent).unwrap();
    assert_eq!(status, 0, "the child's checkpoint did not fail with forked");
    // The child sent nothing on the parent's socket.
    assert_eq!(u64::from_le_bytes(child_sent), 1);
    // The parent's connection is untouched and goes on.
    let m2 = [json!({"t": 2})];
    let r = c
        .checkpoint(&req(&rid, 2, &m2, Usage::default(), 0, None, None))
        .unwrap();
    assert_eq!(r.message_count, 3);
    assert_eq!(sent(&c), 2);
    assert_eq!(stored_turns(&c), [None, Some(json!(1)), Some(json!(2))]);
    // Closed before its daemon is stopped: a daemon stopping waits (up to
    // 1 s) for an idle connection's answer to its close frame, which the
    // path, with no reader of its own, only reads at its next call.
    c.close().unwrap();
}

#[test]
fn discovered_workspace() {
    // connect() without a workspace: libcairn finds it from the current
    // directory, and the path dials that workspace's daemon (asking
    // libcairn's status for it).
    let _alone = SERIAL.write().unwrap_or_else(|p| p.into_inner());
    let ws = TempDir::new("wdisc");
    let srv = nat(Options::new(ws.path())
        .daemon(cairnd())
        .daemon_args(["--idle-timeout=20s"]));
    let _stop = StopOnDrop(srv.status().unwrap().daemon.unwrap().pid);
    let rid = run_of(&srv);
    let sub = ws.path().join("deep/er");
    std::fs::create_dir_all(&sub).unwrap();
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(&sub).unwrap();
    let found = connect_env(None, Options::default().auto_start(false));
    std::env::set_current_dir(cwd).unwrap();
    let found = found.unwrap();
    found
        .checkpoint(&req(
            &rid,
            1,
            &[json!({"t": 1})],
            Usage::default(),
            0,
            None,
            None,
        ))
        .unwrap();
    assert_eq!(sent(&found), 1);
    assert_eq!(stored_turns(&srv), [None, Some(json!(1))]);
}

/// The call timeout of the client whose answers the relay trickles in.
const TRICKLE_BOUND: Duration = Duration::from_millis(400);

/// How often the relay sends a little more of an answer: far more often
/// than TRICKLE_BOUND, so that each read gets something well within it.
const TRICKLE_PAUSE: Duration = Duration::from_millis(100);

/// How long the relay trickles before the test gives up on the call.
const TRICKLE_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn a_call_timeout_bounds_the_whole_answer() {
    // With a call timeout, a daemon that sends part of an answer and then
    // a little now and then cannot stretch the wait past the bound: the
    // bound covers the whole answer, not each read. The relay drops the
    // daemon's answer and sends instead, once the request is through,
    // part of an answer frame (a 4 KiB binary message's header and first
    // bytes) and then one more of its bytes every TRICKLE_PAUSE; or a ping
    // every TRICKLE_PAUSE (each answered with a pong) and no answer. At
    // that pace a bound on each read would never pass.
    let mut f = Fixture::new("wtrkl", &[]);
    let (srv, relay, dir) = relayed(&mut f);
    let n = Arc::new(nat(front(&dir).call_timeout(TRICKLE_BOUND)));
    let rid = first_checkpoint(&srv, &n);
    let partial: (&[u8], &[u8]) = (b"\x82\x7e\x10\x00\xa2\x62id", b"\x00");
    let pings: (&[u8], &[u8]) = (b"\x89\x04ping", b"\x89\x04ping");
    for (t, (first, then), what) in [
        (2, partial, "an answer a byte at a time"),
        (4, pings, "pings and no answer"),
    ] {
        let conns = native_connections(&relay);
        let frames = client_frames(&relay.native_sent(), false).len();
        relay.mute.store(true, Ordering::Release);
        let (tx, rx) = std::sync::mpsc::channel();
        let (c, r) = (n.clone(), rid.clone());
        std::thread::spawn(move || {
            let start = Instant::now();
            let res = tick(&c, &r, t);
            let _ = tx.send((res, start.elapsed()));
        });
        let give_up = Instant::now() + TRICKLE_LIMIT;
        while client_frames(&relay.native_sent(), false).len() == frames {
            assert!(Instant::now() < give_up, "{what}: the request never came");
            std::thread::sleep(Duration::from_millis(5));
        }
        let (mut sock, _) = relay.native();
        let _ = sock.write_all(first);
        let (res, took) = loop {
            match rx.recv_timeout(TRICKLE_PAUSE) {
                Ok(got) => break got,
                Err(_) => {
                    assert!(
                        Instant::now() < give_up,
                        "{what}: the checkpoint still waiting after {TRICKLE_LIMIT:?}"
                    );
                    let _ = sock.write_all(then);
                }
            }
        };
        relay.mute.store(false, Ordering::Release);
        let e = res.expect_err(what);
        assert_eq!(e.code, ErrorCode::Unavailable, "{what}: {e}");
        assert_eq!(e.message, no_answer("checkpoint", "400ms"), "{what}");
        assert!(took >= TRICKLE_BOUND, "{what}: gave up after {took:?}");
        assert_eq!(sent(&n), t as u64, "{what}");
        assert_eq!(n.wire_handed(), Some(0), "{what}: went to libcairn");
        // The connection was dropped: the next call dials again and works.
        let count = tick(&n, &rid, t + 1).unwrap().message_count;
        assert_eq!(count, t + 2, "{what}");
        assert_eq!(native_connections(&relay), conns + 1, "{what}");
    }
    // The pings were answered.
    assert!(
        relay.pongs().iter().any(|p| p.contains(&b"ping".to_vec())),
        "no pong"
    );
    // The daemon had each request whole and carried it out.
    assert_eq!(
        stored_turns(&srv),
        (0..=5)
            .map(|t| (t > 0).then(|| json!(t)))
            .collect::<Vec<_>>()
    );
}
