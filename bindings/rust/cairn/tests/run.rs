//! The run helper (`Client::start_run`) against real processes: a host
//! loop in a child process (this test binary, re-executed to run
//! `run_child`) is SIGKILLed between two turns and then in the middle of a
//! tool call; each new process resumes from the last finished turn with the
//! usage and tool-call counters carried on, and the session ends with every
//! turn's messages once and the run line completed.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn::{MessagesQuery, Options, RunOptions, Turn, Usage};
use common::{Daemon, cairnd};
use serde_json::{Value, json};

const CHILD_ENV: &str = "CAIRN_TEST_RUN_CHILD";

/// The child: a host loop over start_run. Does nothing unless CHILD_ENV is
/// set (to "workspace|session|turns|stop"): then it resumes the session's
/// interrupted run (or starts one), runs turns up to `turns` (each a tool
/// call, then its checkpoint), waits to be killed at `stop` ("between:N"
/// after turn N is saved, "tool:N" in turn N's tool call; "none": finish),
/// and prints one JSON line per event.
#[test]
fn run_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (ws, session, turns, stop) = (
        parts[0],
        parts[1],
        parts[2].parse::<i64>().unwrap(),
        parts[3],
    );
    let hang = || loop {
        std::thread::sleep(Duration::from_secs(1));
    };
    let c = cairn::connect(Options::new(ws).daemon(cairnd()).auto_start(false)).unwrap();
    let mut run = c.start_run(session, &RunOptions::resume()).unwrap();
    println!(
        "{}",
        json!({"event": "start", "run_id": run.run_id(), "resumed_from": run.resumed_from(), "turn": run.turns(),
            "usage": run.usage(), "tools": run.tool_calls_count(), "state": run.state(), "messages": run.messages().len()})
    );
    for n in run.turns() + 1..=turns {
        println!("{}", json!({"event": "tool", "turn": n}));
        if stop == format!("tool:{n}") {
            hang();
        }
        let msgs = [
            json!({"role": "assistant", "content": format!("call tool {n}")}),
            json!({"role": "tool", "content": format!("result {n}")}),
        ];
        let state = json!({"step": n});
        run.turn(&Turn {
            messages: &msgs,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                total_tokens: 15,
                cost: 0.0,
            },
            tool_calls: 1,
            state: Some(&state),
        })
        .unwrap();
        println!("{}", json!({"event": "turn", "turn": n}));
        if stop == format!("between:{n}") {
            hang();
        }
    }
    run.complete().unwrap();
    println!(
        "{}",
        json!({"event": "done", "run_id": run.run_id(), "turn": run.turns(), "usage": run.usage(), "tools": run.tool_calls_count()})
    );
    c.close().unwrap();
    std::process::exit(0);
}

/// Runs the child until it prints an event `until` accepts (then SIGKILLs
/// it) or, with no `until`, until it exits cleanly; returns its events.
fn child(spec: &str, until: Option<&dyn Fn(&Value) -> bool>) -> Vec<Value> {
    let mut p = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "run_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut events = Vec::new();
    let mut killed = false;
    for line in BufReader::new(p.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // The test harness prints its own text ("test run_child ... " is
        // not ended by a newline before the child's first line); the
        // child's lines are JSON objects.
        let Some(at) = line.find('{') else {
            continue;
        };
        let Ok(e) = serde_json::from_str::<Value>(&line[at..]) else {
            continue;
        };
        events.push(e);
        if let Some(f) = until {
            if f(events.last().unwrap()) {
                p.kill().unwrap(); // SIGKILL
                killed = true;
                break;
            }
        }
        assert!(Instant::now() < deadline, "child timed out: {events:?}");
    }
    let st = p.wait().unwrap();
    match until {
        Some(_) => assert!(
            killed,
            "child ended ({st}) before it was killed: {events:?}"
        ),
        None => assert!(st.success(), "child failed ({st}): {events:?}"),
    }
    events
}

#[test]
fn run_killed_between_turns_and_mid_tool_call_resumes_with_counters() {
    let d = Daemon::start("run");
    let ws = d.ws.path().to_str().unwrap().to_string();
    let spec = |stop: &str| format!("{ws}|s1|5|{stop}");

    let a = child(
        &spec("between:2"),
        Some(&|e| e["event"] == "turn" && e["turn"] == 2),
    );
    assert_eq!(a[0]["resumed_from"], Value::Null);
    assert_eq!(a[0]["turn"], 0);

    let b = child(
        &spec("tool:4"),
        Some(&|e| e["event"] == "tool" && e["turn"] == 4),
    );
    assert_eq!(b[0]["resumed_from"], a[0]["run_id"]);
    assert_eq!(b[0]["turn"], 2);
    assert_eq!(b[0]["tools"], 2);
    assert_eq!(b[0]["usage"]["input_tokens"], 20);
    assert_eq!(b[0]["usage"]["total_tokens"], 30);
    assert_eq!(b[0]["state"], json!({"step": 2}));
    assert_eq!(b[0]["messages"], 4);

    let c = child(&spec("none"), None);
    assert_eq!(c[0]["resumed_from"], b[0]["run_id"]);
    assert_eq!(c[0]["turn"], 3);
    assert_eq!(c[0]["tools"], 3);
    assert_eq!(c[0]["usage"]["output_tokens"], 15);
    assert_eq!(c[0]["messages"], 6);
    let done = c.last().unwrap();
    assert_eq!(done["event"], "done");
    assert_eq!(done["turn"], 5);
    assert_eq!(done["tools"], 5);
    assert_eq!(done["usage"]["input_tokens"], 50);

    let page = d.client.messages("s1", &MessagesQuery::default()).unwrap();
    let got: Vec<&str> = page
        .messages
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (1..=5)
        .flat_map(|n| [format!("call tool {n}"), format!("result {n}")])
        .collect();
    assert_eq!(got, want);
    let rec = d
        .client
        .run(done["run_id"].as_str().unwrap(), Some("s1"))
        .unwrap();
    assert_eq!(rec.run.status, "completed");
    assert_eq!(rec.run.tool_calls_count, 5);
    assert_eq!(rec.run.usage.input_tokens, 50);
}

#[test]
fn with_run_completes_on_ok_and_leaves_the_run_resumable_on_err() {
    let d = Daemon::start("withrun");
    let c = &d.client;
    let id = c
        .with_run(
            "w1",
            &RunOptions::default(),
            |run| -> cairn::Result<String> {
                run.turn(&Turn {
                    messages: &[json!("hi")],
                    tool_calls: 2,
                    ..Turn::default()
                })?;
                Ok(run.run_id().to_string())
            },
        )
        .unwrap();
    let rec = c.run(&id, Some("w1")).unwrap();
    assert_eq!(rec.run.status, "completed");
    assert_eq!(rec.run.tool_calls_count, 2);

    let err = c
        .with_run("w2", &RunOptions::default(), |run| -> cairn::Result<()> {
            run.turn(&Turn {
                messages: &[json!("one")],
                ..Turn::default()
            })?;
            Err(cairn::Error::new(cairn::ErrorCode::Internal, "boom"))
        })
        .unwrap_err();
    assert_eq!(err.message, "boom");
    let mut run = c.start_run("w2", &RunOptions::resume()).unwrap();
    assert!(run.resumed_from().is_some());
    assert_eq!(run.turns(), 1);
    run.complete().unwrap();
    let mut fresh = c.start_run("w2", &RunOptions::resume()).unwrap();
    assert_eq!(fresh.resumed_from(), None);
    assert_eq!(fresh.turns(), 0);
    fresh.complete().unwrap();
}
