//! Latency of a no-op `status` and a 1 KB delta save (one ~1 KB message
//! appended), in embedded and daemon modes, each over a fresh temporary
//! workspace. Prints one JSON line per measurement:
//!
//!   {"lang":"rust","mode":"embedded","op":"status","median_us":..,"p99_us":..}
//!
//! Run: `cargo run --release --example bench`. The daemon is
//! `$CAIRN_DAEMON`, else the repository's build/cairnd; it is stopped
//! afterwards. BENCH_STATUS_N and BENCH_SAVE_N set the iteration counts.

// The tests' helpers: temporary workspaces, the daemon's path, stopping it.
#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use cairn::{Change, Client, Options};
use common::{TempDir, cairnd, stop_process};
use serde_json::json;

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn report(mode: &str, op: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let us = |d: Duration| (d.as_nanos() as f64 / 1000.0 * 100.0).round() / 100.0;
    let median = samples[samples.len() / 2];
    let p99 = samples[((samples.len() as f64 * 0.99) as usize).min(samples.len() - 1)];
    #[derive(serde::Serialize)]
    struct Line<'a> {
        lang: &'a str,
        mode: &'a str,
        op: &'a str,
        median_us: f64,
        p99_us: f64,
    }
    let line = Line {
        lang: "rust",
        mode,
        op,
        median_us: us(median),
        p99_us: us(p99),
    };
    println!("{}", serde_json::to_string(&line).unwrap());
}

fn measure(n: usize, warmup: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..warmup {
        f();
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f();
        out.push(t.elapsed());
    }
    out
}

fn bench(mode: &str, c: &Client) {
    let status_n = env_n(
        "BENCH_STATUS_N",
        if mode == "embedded" { 50_000 } else { 10_000 },
    );
    let save_n = env_n("BENCH_SAVE_N", 1_000);
    report(
        mode,
        "status",
        measure(status_n, status_n / 10, || {
            c.status().expect("status");
        }),
    );
    // One ~1 KB message per save: the JSON of the message is 1024 bytes.
    let content = "x".repeat(1024 - r#"{"role":"assistant","content":""}"#.len());
    let change = Change::append_messages([json!({"role": "assistant", "content": content})]);
    assert_eq!(
        serde_json::to_vec(&change.append_messages[0])
            .unwrap()
            .len(),
        1024
    );
    c.save("bench", &change, None).expect("save");
    report(
        mode,
        "save_1kb",
        measure(save_n, save_n / 10, || {
            c.save("bench", &change, None).expect("save");
        }),
    );
}

fn main() {
    {
        let ws = TempDir::new("emb");
        let c = cairn::connect(Options::new(ws.path()).embedded(true)).expect("embedded connect");
        bench("embedded", &c);
        c.close().expect("close");
    }
    {
        let ws = TempDir::new("dmn");
        let c = cairn::connect(
            Options::new(ws.path())
                .daemon(cairnd())
                .daemon_args(["--idle-timeout=60s"]),
        )
        .expect("daemon connect");
        let pid = c
            .status()
            .expect("status")
            .daemon
            .expect("daemon status")
            .pid;
        bench("daemon", &c);
        c.close().expect("close");
        stop_process(pid);
    }
}
