//! The run helper's turn whose outcome is unknown, against a real cairnd
//! stopped with SIGSTOP, on the client's own checkpoint connection and
//! through libcairn (CAIRN_RUST_WIRE=0). A turn whose checkpoint got no
//! answer fails with `Unavailable`; when the daemon carried it out after
//! all, the host's retry of the same turn (its numbers written as floats)
//! returns its number without saving it twice and the next turn follows
//! it; when it did not (a request cut before it was whole), the host's
//! next turn takes its number. The totals follow what was committed.

mod common;

use std::time::{Duration, Instant};

use cairn::*;
use common::*;
use serde_json::{Value, json};

/// How long a test lets one call (or a wait) take before it fails.
const LIMIT: Duration = Duration::from_secs(10);

/// Runs f on a thread and returns its result; fails the test when it has
/// not returned within LIMIT.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    common::within(LIMIT, what, f).0
}

fn usage(input: i64) -> Usage {
    Usage {
        input_tokens: input,
        ..Usage::default()
    }
}

type Run = AgentRun<'static>;

/// One turn of the helper, on a thread bounded by LIMIT (the run goes
/// there and back).
fn turn(
    run: &mut Option<Run>,
    what: &str,
    msgs: Vec<Value>,
    input: i64,
    tools: i64,
    state: Option<Value>,
) -> Result<i64> {
    let mut r = run.take().expect("the run came back");
    let (r, res) = within(what, move || {
        let res = r.turn(&Turn {
            messages: &msgs,
            usage: usage(input),
            tool_calls: tools,
            state: state.as_ref(),
        });
        (r, res)
    });
    *run = Some(r);
    res
}

fn unknown(what: &str, r: Result<i64>) {
    let e = r.expect_err(what);
    assert_eq!(e.code, ErrorCode::Unavailable, "{what}: {e}");
    assert!(e.message.contains("no answer to checkpoint"), "{what}: {e}");
}

/// The run's last committed turn, read until it is `n` (bounded by LIMIT;
/// errors while the daemon comes back are retried).
fn wait_turn(c: &Client, run_id: &str, n: i64) {
    let deadline = Instant::now() + LIMIT;
    loop {
        match c.run(run_id, None) {
            Ok(r) if r.checkpoint.as_ref().map_or(0, |c| c.turn) == n => return,
            Ok(r) => assert!(
                Instant::now() < deadline,
                "run {run_id} never reached turn {n}: {:?}",
                r.checkpoint
            ),
            Err(e) => assert!(
                Instant::now() < deadline,
                "run {run_id} never reached turn {n}: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn settles(tag: &str, wire: Option<&str>) {
    let d = Daemon::start(tag);
    let opts = daemon_options(&d.ws).call_timeout(Duration::from_millis(400));
    // Leaked, so that a call on a thread that outlives its bound can
    // hold it.
    let c: &'static Client = Box::leak(Box::new(connect_env(wire, opts).unwrap()));
    assert_eq!(c.wire_sent().is_some(), wire.is_none());
    let pid = c.status().unwrap().daemon.unwrap().pid;
    assert_eq!(pid, d.pid);

    let r = within("start_run", || c.start_run("s", &RunOptions::default()));
    let mut run = Some(r.unwrap());
    let run_id = run.as_ref().unwrap().run_id().to_string();
    let t = |n: i64| vec![json!({"t": n})];
    let k2 = json!({"k": 2});
    assert_eq!(turn(&mut run, "turn 1", t(1), 1, 1, None).unwrap(), 1);

    // No answer, but the daemon carries it out once it runs again.
    let mut stopped = Stopped::new(pid);
    let r = turn(&mut run, "turn 2, stopped", t(2), 2, 1, Some(k2.clone()));
    unknown("turn 2, stopped", r);
    assert_eq!(
        run.as_ref().unwrap().turns(),
        1,
        "an unknown turn was counted"
    );
    stopped.cont();
    wait_turn(c, &run_id, 2);

    // The host retries it, its numbers written as floats (as a host that
    // re-encodes a turn may): the same turn, its number, not saved twice.
    let sent = c.wire_sent();
    let again = vec![json!({"t": 2.0})];
    let k2_again = json!({"k": 2.0});
    let r = turn(&mut run, "turn 2, again", again, 2, 1, Some(k2_again));
    assert_eq!(r.unwrap(), 2);
    assert_eq!(c.wire_sent(), sent, "the retry was sent");
    let ru = run.as_ref().unwrap();
    assert_eq!(
        (ru.turns(), ru.usage(), ru.tool_calls_count(), ru.state()),
        (2, usage(3), 2, Some(&k2))
    );
    assert_eq!(turn(&mut run, "turn 3", t(3), 0, 0, None).unwrap(), 3);

    // Cut before it was whole (16 MiB cannot sit in the socket's
    // buffers): not carried out; the next, different turn is 4.
    let mut stopped = Stopped::new(pid);
    let big = vec![json!({"t": "x".repeat(16 << 20)})];
    let r = turn(&mut run, "turn 4, 16 MiB, stopped", big, 9, 9, None);
    unknown("turn 4, 16 MiB, stopped", r);
    stopped.cont();
    assert_eq!(turn(&mut run, "turn 4", t(4), 4, 0, None).unwrap(), 4);
    let mut ru = run.take().unwrap();
    assert_eq!((ru.usage(), ru.tool_calls_count()), (usage(7), 2));
    let (ru, res) = within("complete", move || {
        let res = ru.complete();
        (ru, res)
    });
    res.unwrap();
    drop(ru);

    let id = run_id.clone();
    let got = within("run", move || c.run(&id, None)).unwrap();
    assert_eq!(got.run.status, run_status::COMPLETED);
    assert_eq!(
        (got.run.usage, got.run.tool_calls_count),
        (usage(7), 2),
        "{:?}",
        got.run
    );
    let msgs = within("messages", || c.messages("s", &MessagesQuery::default()))
        .unwrap()
        .messages;
    let ts: Vec<&Value> = msgs.iter().map(|m| &m["t"]).collect();
    assert_eq!(ts, [&json!(1), &json!(2), &json!(3), &json!(4)]);
    let _ = c.close();
}

#[test]
fn own_connection() {
    settles("ruo", None);
}

#[test]
fn libcairn() {
    settles("rul", Some("0"));
}
