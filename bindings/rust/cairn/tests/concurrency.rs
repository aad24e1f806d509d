//! Many threads on one client, and parallel_resumable.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use cairn::*;
use common::*;
use serde_json::{Value, json};

const THREADS: usize = 8;
const SAVES: usize = 50;

/// 8 threads × 50 delta saves to one shared session and to one session per
/// thread: every save gets a distinct generation, each thread's generations
/// increase, and every message is there, in each thread's order.
fn concurrent_saves(c: &Client) {
    let gens: Vec<Vec<u64>> = thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..SAVES {
                        let msg = json!({"t": t, "i": i});
                        let g = c
                            .save("shared", &Change::append_messages([msg.clone()]), None)
                            .unwrap();
                        mine.push(g);
                        let own = c
                            .save(&format!("own-{t}"), &Change::append_messages([msg]), None)
                            .unwrap();
                        assert_eq!(own, i as u64 + 1);
                        if i % 10 == 0 {
                            assert!(matches!(
                                c.status().unwrap().mode.as_str(),
                                "embedded" | "daemon"
                            ));
                        }
                    }
                    mine
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total = (THREADS * SAVES) as u64;
    let all: BTreeSet<u64> = gens.iter().flatten().copied().collect();
    assert_eq!(all, (1..=total).collect::<BTreeSet<_>>());
    for g in &gens {
        assert!(g.windows(2).all(|w| w[0] < w[1]));
    }
    let r = c.resume_session("shared").unwrap();
    assert_eq!(r.generation, total);
    assert_eq!(r.snapshot.messages.len(), total as usize);
    for t in 0..THREADS {
        let is: Vec<u64> = r
            .snapshot
            .messages
            .iter()
            .filter(|m| m["t"] == json!(t))
            .map(|m| m["i"].as_u64().unwrap())
            .collect();
        assert_eq!(is, (0..SAVES as u64).collect::<Vec<_>>());
        let own = c.resume_session(&format!("own-{t}")).unwrap();
        assert_eq!(own.generation, SAVES as u64);
    }
}

#[test]
fn concurrent_saves_embedded() {
    let ws = TempDir::new("conc");
    concurrent_saves(&embedded(&ws));
}

#[test]
fn concurrent_saves_daemon() {
    let d = Daemon::start("dconc");
    concurrent_saves(&d.client);
}

#[test]
fn client_shared_through_arc() {
    let ws = TempDir::new("arc");
    let c = Arc::new(embedded(&ws));
    let hs: Vec<_> = (0..4)
        .map(|t| {
            let c = Arc::clone(&c);
            thread::spawn(move || {
                c.save(&format!("a{t}"), &Change::append_messages([json!(t)]), None)
                    .unwrap()
            })
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), 1);
    }
    assert_eq!(c.list_sessions().unwrap().len(), 4);
}

#[derive(Default)]
struct Counters {
    calls: [AtomicUsize; 4],
    running: AtomicUsize,
    max_running: AtomicUsize,
}

const IDS: [&str; 4] = ["a", "b", "c", "d"];

fn steps<'s>(n: &'s Counters, fail_c: bool, identity_c: &str) -> Vec<Step<'s, Value, String>> {
    IDS.iter()
        .enumerate()
        .map(|(i, id)| {
            let identity = if *id == "c" {
                identity_c.to_string()
            } else {
                format!("v1-{id}")
            };
            Step::new(*id, identity, move || {
                n.calls[i].fetch_add(1, Ordering::SeqCst);
                let now = n.running.fetch_add(1, Ordering::SeqCst) + 1;
                n.max_running.fetch_max(now, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(30));
                n.running.fetch_sub(1, Ordering::SeqCst);
                if fail_c && *id == "c" {
                    return Err(format!("step {id} broke"));
                }
                Ok(json!({"step": id, "n": i}))
            })
        })
        .collect()
}

fn calls(n: &Counters) -> [usize; 4] {
    [0, 1, 2, 3].map(|i| n.calls[i].load(Ordering::SeqCst))
}

fn parallel_resumable(c: &Client) {
    let n = Counters::default();
    // 1. c fails: the others run (concurrently) and stay recorded.
    match c.parallel_resumable(steps(&n, true, "v1-c"), "wf") {
        Err(WorkflowError::Step { step_id, error }) => {
            assert_eq!(step_id, "c");
            assert_eq!(error, "step c broke");
        }
        other => panic!("expected the failure of step c, got {other:?}"),
    }
    assert_eq!(calls(&n), [1, 1, 1, 1]);
    assert!(
        n.max_running.load(Ordering::SeqCst) > 1,
        "steps did not run concurrently"
    );
    let done: BTreeSet<String> = c
        .begin_workflow(
            "wf",
            &IDS.map(|id| StepSpec::new(id, format!("v1-{id}"))),
            None,
        )
        .unwrap()
        .into_iter()
        .map(|r| r.step_id)
        .collect();
    assert_eq!(
        done,
        ["a", "b", "d"].map(String::from).into_iter().collect()
    );

    // 2. Rerun: only c runs; results come back in spec order.
    let out = c
        .parallel_resumable(steps(&n, false, "v1-c"), "wf")
        .unwrap();
    assert_eq!(calls(&n), [1, 1, 2, 1]);
    let want: Vec<Value> = IDS
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"step": id, "n": i}))
        .collect();
    assert_eq!(out, want);

    // 3. Everything recorded: nothing runs, the recorded results decode.
    let out = c
        .parallel_resumable(steps(&n, false, "v1-c"), "wf")
        .unwrap();
    assert_eq!(calls(&n), [1, 1, 2, 1]);
    assert_eq!(out, want);

    // 4. A changed identity fails closed before anything runs.
    let e = c
        .parallel_resumable(steps(&n, false, "v2-c"), "wf")
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::StepIdentityChanged), "{e}");
    assert_eq!(calls(&n), [1, 1, 2, 1]);

    // 5. Typed results, a session-owned workflow, finish.
    c.save("owner", &Change::append_messages([json!(1)]), None)
        .unwrap();
    let typed: Vec<Step<'_, (u32, String), std::io::Error>> = (0..3)
        .map(|i| Step::new(format!("s{i}"), "x", move || Ok((i, format!("r{i}")))))
        .collect();
    let out = c
        .parallel_resumable_in(typed, "wf2", Some("owner"))
        .unwrap();
    assert_eq!(out, [(0, "r0".into()), (1, "r1".into()), (2, "r2".into())]);
    c.delete("owner").unwrap(); // deleting the session deletes its workflow
    assert!(
        c.begin_workflow("wf2", &[StepSpec::new("s0", "x")], None)
            .unwrap()
            .is_empty()
    );
    c.finish_workflow("wf").unwrap();
    assert!(
        c.begin_workflow("wf", &[StepSpec::new("a", "v1-a")], None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn parallel_resumable_embedded() {
    let ws = TempDir::new("par");
    parallel_resumable(&embedded(&ws));
}

#[test]
fn parallel_resumable_daemon() {
    let d = Daemon::start("dpar");
    parallel_resumable(&d.client);
}

#[test]
fn parallel_resumable_panic_keeps_others_recorded() {
    let ws = TempDir::new("pan");
    let c = embedded(&ws);
    let ran = AtomicUsize::new(0);
    let specs = || -> Vec<Step<'_, u32, String>> {
        vec![
            Step::new("ok", "1", || {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(1)
            }),
            Step::new("boom", "1", || panic!("step panicked")),
        ]
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.parallel_resumable(specs(), "wp")
    }));
    assert!(r.is_err(), "the panic was not resumed");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let done = c
        .begin_workflow(
            "wp",
            &[StepSpec::new("ok", "1"), StepSpec::new("boom", "1")],
            None,
        )
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].step_id, "ok");
    // a failing completeStep surfaces as a cairn error (closed client)
    let specs2: Vec<Step<'_, u32, String>> = vec![Step::new("x", "1", || Ok(1))];
    c.close().unwrap();
    let e = c.parallel_resumable(specs2, "wp").unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::BadHandle));
}
