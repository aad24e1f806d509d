//! `Options::call_timeout` against a real cairnd stopped with SIGSTOP: a
//! checkpoint on the client's own connection (src/wire.rs) and calls
//! through libcairn (a Client made with CAIRN_RUST_WIRE=0) fail alike,
//! with libcairn's code and message, once the bound passes; once the
//! daemon runs again the same clients work. A call timeout of zero (no
//! bound) waits on that connection as long as the daemon takes.

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cairn::*;
use common::*;
use serde_json::{Value, json};

/// How long a test lets one call take before it fails (rather than hang).
const LIMIT: Duration = Duration::from_secs(10);

const BOUND: Duration = Duration::from_millis(400);

/// The call timeout of the client whose big checkpoint's write is cut.
const BOUND2: Duration = Duration::from_secs(1);

/// Runs f on a thread: its result and how long it took; fails the test
/// when it has not returned within LIMIT.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    common::within(LIMIT, what, f)
}

/// Checks that `r` failed as a call whose bound (400ms) passed does.
fn check(what: &str, r: Result<impl std::fmt::Debug>, took: Duration, method: &str) -> Error {
    check_within(what, r, took, method, BOUND, "400ms")
}

fn check_within(
    what: &str,
    r: Result<impl std::fmt::Debug>,
    took: Duration,
    method: &str,
    bound: Duration,
    spelt: &str,
) -> Error {
    let e = r.expect_err(what);
    assert_eq!(e.code, ErrorCode::Unavailable, "{what}: {e}");
    assert_eq!(e.message, no_answer(method, spelt), "{what}");
    assert!(
        took >= bound,
        "{what} gave up after {took:?}, before its {bound:?}"
    );
    e
}

fn checkpoint(c: &Client, rid: &str, turn: i64, msg: Value) -> Result<CheckpointResult> {
    c.checkpoint(&CheckpointRequest {
        run_id: rid.into(),
        turn,
        new_messages: vec![msg].into(),
        ..Default::default()
    })
}

fn big(tag: &str) -> Value {
    // 16 MiB cannot sit in the socket's buffers: the write itself blocks.
    json!({"role": "user", "content": format!("big {tag} {}", "x".repeat(16 << 20))})
}

fn sent(c: &Client) -> u64 {
    c.wire_sent().expect("the path is on")
}

fn handed(c: &Client) -> u64 {
    c.wire_handed().expect("the path is on")
}

#[test]
fn stopped_daemon() {
    let d = Daemon::start("cto");
    let opts = daemon_options(&d.ws).call_timeout(BOUND);
    // n: the own connection for checkpoints; n2: another, for the big
    // checkpoint; l: libcairn only.
    let n = Arc::new(connect_env(None, opts.clone()).unwrap());
    let n2 = Arc::new(connect_env(None, opts.clone().call_timeout(BOUND2)).unwrap());
    let l = Arc::new(connect_env(Some("0"), opts).unwrap());
    assert_eq!(l.wire_sent(), None);
    let pid = n.status().unwrap().daemon.unwrap().pid;
    assert_eq!(pid, d.pid);
    assert_eq!(l.status().unwrap().daemon.unwrap().pid, pid);
    l.save(
        "s",
        &Change::append_messages([json!({"role": "user", "content": "one"})]),
        None,
    )
    .unwrap();
    let [rn, rn2, rl] = ["rn", "rn2", "rl"].map(|r| l.begin_run("s", Some(r)).unwrap().run_id);
    checkpoint(&n, &rn, 1, json!({"t": "n1"})).unwrap();
    checkpoint(&n2, &rn2, 1, json!({"t": "n2-1"})).unwrap();
    checkpoint(&l, &rl, 1, json!({"t": "l1"})).unwrap();
    assert_eq!((sent(&n), sent(&n2)), (1, 1));

    let mut stopped = Stopped::new(pid);

    // The own connection: the answer's bound.
    let (c, r) = (n.clone(), rn.clone());
    let (res, took) = within("own checkpoint", move || {
        checkpoint(&c, &r, 2, json!({"t": "n2"}))
    });
    let en = check("own checkpoint", res, took, "checkpoint");
    assert_eq!(sent(&n), 2, "the checkpoint went on the own connection");

    // libcairn: the same error.
    let (c, r) = (l.clone(), rl.clone());
    let (res, took) = within("libcairn checkpoint", move || {
        checkpoint(&c, &r, 2, json!({"t": "l2"}))
    });
    let el = check("libcairn checkpoint", res, took, "checkpoint");
    assert_eq!((en.code, en.message), (el.code, el.message));

    // A 16 MiB save through libcairn: its write is cut.
    let c = l.clone();
    let (res, took) = within("libcairn 16 MiB save", move || {
        c.save("s", &Change::append_messages([big("save")]), None)
    });
    check("libcairn 16 MiB save", res, took, "save");

    // A 16 MiB checkpoint on the own connection: its write is cut, and
    // the checkpoint is not handed to libcairn afterwards, which would
    // wait on the stopped daemon again.
    let (c, r) = (n2.clone(), rn2.clone());
    let m = big("checkpoint");
    let (res, took) = within("own 16 MiB checkpoint", move || checkpoint(&c, &r, 2, m));
    check_within(
        "own 16 MiB checkpoint",
        res,
        took,
        "checkpoint",
        BOUND2,
        "1s",
    );
    assert_eq!(sent(&n2), 1, "a request not written whole is not counted");
    assert_eq!(
        handed(&n2),
        0,
        "a checkpoint whose write was cut went on to libcairn"
    );

    // The own connection was dropped: the next call dials, and the dial,
    // which the stopped daemon does not answer, is bounded by the call
    // timeout too; nothing is sent, and nothing handed to libcairn.
    let (c, r) = (n.clone(), rn.clone());
    let (res, took) = within("own checkpoint, redialing", move || {
        checkpoint(&c, &r, 3, json!({"t": "n3"}))
    });
    check("own checkpoint, redialing", res, took, "checkpoint");
    assert_eq!((sent(&n), handed(&n)), (2, 0));

    stopped.cont();

    // The same clients work again: libcairn reconnects, the own path
    // dials again (after its retry gap).
    let deadline = Instant::now() + LIMIT;
    let retry = |what: &str, f: &dyn Fn() -> Result<()>| loop {
        match f() {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("{what}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{what} once the daemon runs again: {e}"),
        }
    };
    retry("libcairn save", &|| {
        l.save(
            "s",
            &Change::append_messages([json!({"role": "user", "content": "two"})]),
            None,
        )
        .map(drop)
    });
    retry("libcairn checkpoint", &|| {
        checkpoint(&l, &rl, 10, json!({"t": "l10"})).map(drop)
    });
    std::thread::sleep(Duration::from_millis(300)); // the path's retry gap
    for (c, r) in [(&n, &rn), (&n2, &rn2)] {
        let before = sent(c);
        checkpoint(c, r, 10, json!({"t": "10"})).unwrap();
        assert_eq!(sent(c), before + 1, "{r}: the own connection again");
        checkpoint(c, r, 11, json!({"t": "11"})).unwrap();
        assert_eq!(sent(c), before + 2);
    }
    // The requests whose writes were cut are not in the session: the
    // daemon dropped their partial frames.
    let msgs = l.messages("s", &MessagesQuery::default()).unwrap().messages;
    let text = serde_json::to_string(&msgs).unwrap();
    assert!(text.contains("\"one\"") && text.contains("\"two\""));
    assert!(!text.contains("big "), "a cut request was carried out");
}

#[test]
fn zero_waits_for_a_stopped_daemon() {
    let d = Daemon::start("ctz");
    let z =
        Arc::new(connect_env(None, daemon_options(&d.ws).call_timeout(Duration::ZERO)).unwrap());
    z.save(
        "s",
        &Change::append_messages([json!({"role": "user", "content": "one"})]),
        None,
    )
    .unwrap();
    let rid = z.begin_run("s", Some("rz")).unwrap().run_id;
    // The first checkpoint dials the own connection while the daemon runs.
    let first = checkpoint(&z, &rid, 1, json!({"t": "z1"})).unwrap();
    assert_eq!((first.message_count, sent(&z)), (2, 1));

    let mut stopped = Stopped::new(d.pid);
    let (tx, rx) = mpsc::channel();
    let (c, r) = (z.clone(), rid.clone());
    std::thread::spawn(move || {
        let _ = tx.send(checkpoint(&c, &r, 2, json!({"t": "z2"})));
    });
    // No bound: the checkpoint neither fails nor returns while the daemon
    // is stopped.
    match rx.recv_timeout(Duration::from_millis(1500)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        other => panic!("a checkpoint with no bound did not wait for a stopped daemon: {other:?}"),
    }
    stopped.cont();
    let res = match rx.recv_timeout(LIMIT) {
        Ok(r) => r.expect("the checkpoint once the daemon runs again"),
        Err(e) => panic!("the checkpoint has not returned {LIMIT:?} after SIGCONT: {e}"),
    };
    assert_eq!(res.message_count, 3);
    assert!(res.generation > first.generation);
    assert_eq!(
        (sent(&z), handed(&z)),
        (2, 0),
        "the checkpoint went on the own connection"
    );
    let msgs = z.messages("s", &MessagesQuery::default()).unwrap().messages;
    assert_eq!(msgs.last(), Some(&json!({"t": "z2"})));
}

#[test]
fn out_of_range() {
    let ws = TempDir::new("ctr");
    let opts = || Options::new(ws.path()).daemon(cairnd()).auto_start(false);
    for d in [
        Duration::from_secs(100_000),
        Duration::from_millis(86_400_001),
        Duration::MAX,
    ] {
        let e = connect_env(None, opts().call_timeout(d)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{d:?}: {e}");
        assert!(e.message.contains("call_timeout_ms"), "{d:?}: {e}");
    }
    // One day is the largest; embedded mode takes (and ignores) it.
    let c = connect_env(
        None,
        Options::new(ws.path())
            .embedded(true)
            .call_timeout(Duration::from_secs(86_400)),
    )
    .unwrap();
    c.save("s", &Change::append_messages([json!({"a": 1})]), None)
        .unwrap();
}
