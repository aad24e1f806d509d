//! One Rust agent process for the benchmark drivers: an agent's turns
//! through this crate against an already running cairnd (the worker
//! protocol of bench/agent/node_agent.js).
//!
//!   agent_turns <workspace> <session_id> <turns> <turns_file>
//!
//! Connects to the workspace's daemon (daemon mode, no auto-start), saves
//! the session with one system message appended, begins a run and reads
//! turns_file: a JSON array whose element k is turn k+1, {"messages":
//! [...], "usage": {...}, "state": {...}}. Prints "ready", waits for one
//! line on stdin, then makes turn i = 1..turns's checkpoint (turn i, the
//! turn's messages, usage and state, tool_calls_count i), timing each, and
//! prints one JSON line:
//!
//!   {"start": <wall clock s>, "end": <wall clock s>, "cpu_s": <this
//!    process's user+system CPU during the turns>, "median_us": ...,
//!    "p99_us": ..., "wire_sent": <checkpoints sent by the binding's own
//!    connection (CAIRN_RUST_WIRE=0: none)>, "mono_start": ..., "mono_end":
//!    ... (CLOCK_MONOTONIC seconds, as Python's time.monotonic())}
//!
//! then closes the client and exits 0. Errors go to stderr, exit 1 (2 for
//! bad arguments).
//!
//! Build: `cargo build --release --example agent_turns` in bindings/rust.

use std::borrow::Cow;
use std::io::{BufRead, Write};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cairn::{Change, CheckpointRequest, Options, Usage};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct TurnData {
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    usage: Usage,
    #[serde(default)]
    state: Option<Value>,
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

unsafe extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

const CLOCK_MONOTONIC: i32 = 1;
const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;

/// The clock's reading in seconds (Linux clock ids).
fn clock_s(clock: i32) -> f64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec (64-bit Linux layout).
    let rc = unsafe { clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock})");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn wall_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The q quantile of sorted samples (ns), in microseconds, as
/// agent_bench.py's pct.
fn pct(sorted: &[u64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q) as usize).min(sorted.len() - 1);
    sorted[i] as f64 / 1000.0
}

fn usage(msg: &str) -> ! {
    eprintln!("{msg}\nusage: agent_turns <workspace> <session_id> <turns> <turns_file>");
    std::process::exit(2);
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        usage("four arguments are needed");
    }
    let (workspace, session_id, turns_file) = (&args[0], &args[1], &args[3]);
    let turns: usize = match args[2].parse() {
        Ok(n) if n >= 1 => n,
        _ => usage(&format!(
            "turns must be a positive integer, not {:?}",
            args[2]
        )),
    };
    let data: Vec<TurnData> = serde_json::from_slice(&std::fs::read(turns_file)?)?;
    if data.len() < turns {
        usage(&format!(
            "{turns_file} must be a JSON array of at least {turns} turns"
        ));
    }

    let c = cairn::connect(Options::new(workspace).auto_start(false))?;
    c.save(
        session_id,
        &Change::append_messages([json!({"role": "system", "content": "you are an agent"})]),
        None,
    )?;
    let run_id = c.begin_run(session_id, None)?.run_id;
    let mut samples = Vec::with_capacity(turns);

    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;

    let start = wall_s();
    let mono_start = clock_s(CLOCK_MONOTONIC);
    let cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (i, t) in data.iter().take(turns).enumerate() {
        let turn = i as i64 + 1;
        let t0 = Instant::now();
        c.checkpoint(&CheckpointRequest {
            run_id: Cow::Borrowed(&run_id),
            session_id: None,
            turn,
            new_messages: Cow::Borrowed(&t.messages),
            usage: t.usage,
            tool_calls_count: turn,
            state: t.state.as_ref().map(Cow::Borrowed),
        })?;
        samples.push(t0.elapsed().as_nanos() as u64);
    }
    let cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    let end = wall_s();
    let mono_end = clock_s(CLOCK_MONOTONIC);
    samples.sort_unstable();
    let line = json!({
        "start": start,
        "end": end,
        "cpu_s": cpu_s,
        "median_us": pct(&samples, 0.5),
        "p99_us": pct(&samples, 0.99),
        "wire_sent": c.wire_sent().unwrap_or(0),
        "mono_start": mono_start,
        "mono_end": mono_end,
    });
    writeln!(out, "{line}")?;
    out.flush()?;
    c.close()?;
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("agent_turns: {e}");
        std::process::exit(1);
    }
}
