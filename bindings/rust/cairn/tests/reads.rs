//! The targeted reads and the delta edits, embedded and through the daemon:
//! each read answers exactly the matching part of `resume_session`.

mod common;

use std::borrow::Cow;

use cairn::*;
use common::*;
use serde_json::{Value, json};

/// Message i: sizes vary, so byte-bounded pages differ from counted ones.
fn msg(i: usize) -> Value {
    json!({"role": "user", "content": format!("m{i} {}", "x".repeat(i * 7 % 50))})
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> Error {
    r.expect_err("expected an error")
}

/// The artifacts as a metadata-only read lists them.
fn without_data(arts: &[Artifact]) -> Vec<Artifact> {
    arts.iter()
        .map(|a| Artifact {
            data: None,
            ..a.clone()
        })
        .collect()
}

/// Reads the query's whole range page by page, checking each page.
fn walk(c: &Client, sid: &str, mut q: MessagesQuery) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        let p = c.messages(sid, &q).unwrap();
        pages += 1;
        if q.tail == 0 && q.since_generation == 0 {
            assert_eq!(p.from, q.from);
        }
        assert_eq!(p.next, p.from + p.messages.len() as u64);
        if q.limit > 0 {
            assert!(p.messages.len() as u64 <= q.limit, "{p:?}");
        }
        assert!(
            !p.messages.is_empty() || !p.more,
            "a page with more to come is empty"
        );
        out.extend(p.messages);
        if !p.more {
            break;
        }
        assert!(pages <= 100, "paging does not end");
        q = MessagesQuery {
            tail: 0,
            since_generation: 0,
            from: p.next,
            ..q
        };
    }
    (out, pages)
}

fn exercise_reads(c: &Client) {
    // A session built over three generations.
    let snap = Snapshot {
        messages: (0..5).map(msg).collect(),
        artifacts: vec![
            Artifact {
                name: "plan".into(),
                media_type: "text/plain".into(),
                metadata: Some(json!({"label": "plan", "step": 3})),
                ..Artifact::with_bytes("a1", b"first plan")
            },
            Artifact {
                id: "a2".into(),
                path: "src/main.rs".into(),
                ..Artifact::default()
            },
        ],
        ..Snapshot::default()
    };
    let g1 = c.save("s", &snap, Some(0)).unwrap();
    let g2 = c
        .save("s", &Change::append_messages((5..8).map(msg)), Some(g1))
        .unwrap();
    let g3 = c
        .save(
            "s",
            &Change {
                append_messages: (8..10).map(msg).collect(),
                append_traces: vec![Trace {
                    kind: "note".into(),
                    data: Some(json!({"n": 1})),
                    ..Trace::default()
                }],
                ..Change::default()
            },
            Some(g2),
        )
        .unwrap();
    let full = c.resume_session("s").unwrap();
    let all = &full.snapshot.messages;
    assert_eq!(full.generation, g3);
    assert_eq!(all.len(), 10);
    assert_eq!((full.message_count, full.messages_from), (10, 0));

    // summary: the counts and times of the full read, no content
    let sum = c.summary("s").unwrap();
    assert_eq!(sum.session_id, "s");
    assert_eq!(sum.generation, g3);
    assert_eq!(sum.message_count, 10);
    assert_eq!(sum.artifact_count, 2);
    assert_eq!(sum.trace_count, full.snapshot.traces.len() as i64);
    assert_eq!(Some(&sum.created_at), full.snapshot.created_at.as_ref());
    assert_eq!(Some(&sum.updated_at), full.snapshot.updated_at.as_ref());
    assert!(sum.live_bytes > 0);
    assert_eq!(code(c.summary("missing")).code, ErrorCode::NotFound);

    // messages: every range is the same slice of the full read
    let page = c.messages("s", &MessagesQuery::default()).unwrap();
    assert_eq!(&page.messages, all);
    assert_eq!(
        (page.session_id.as_str(), page.generation, page.total),
        ("s", g3, 10)
    );
    assert_eq!((page.from, page.next, page.more), (0, 10, false));
    let cases: [(MessagesQuery, std::ops::Range<usize>); 7] = [
        (
            MessagesQuery {
                tail: 3,
                ..Default::default()
            },
            7..10,
        ),
        (
            MessagesQuery {
                tail: 99,
                ..Default::default()
            },
            0..10,
        ),
        (
            MessagesQuery {
                from: 2,
                to: 5,
                ..Default::default()
            },
            2..5,
        ),
        (
            MessagesQuery {
                from: 6,
                ..Default::default()
            },
            6..10,
        ),
        (
            MessagesQuery {
                since_generation: g1,
                ..Default::default()
            },
            5..10,
        ),
        (
            MessagesQuery {
                since_generation: g2,
                ..Default::default()
            },
            8..10,
        ),
        (
            MessagesQuery {
                since_generation: g3,
                ..Default::default()
            },
            10..10,
        ),
    ];
    for (q, want) in cases {
        let p = c.messages("s", &q).unwrap();
        assert_eq!(p.messages, all[want.clone()], "{q:?}");
        assert_eq!(
            (p.from, p.next),
            (want.start as u64, want.end as u64),
            "{q:?}"
        );
        assert!(!p.more, "{q:?}");
        assert_eq!(p.total, 10);
    }
    // paging by count and by bytes walks the whole list
    for (limit, max_bytes) in [(1, 0), (3, 0), (0, 1), (0, 90), (2, 120)] {
        let q = MessagesQuery {
            limit,
            max_bytes,
            ..Default::default()
        };
        let (got, pages) = walk(c, "s", q);
        assert_eq!(&got, all, "{q:?}");
        assert!(pages > 1, "{q:?}: one page");
        if limit == 1 || max_bytes == 1 {
            assert_eq!(pages, 10, "{q:?}");
        }
    }
    let (got, pages) = walk(
        c,
        "s",
        MessagesQuery {
            tail: 5,
            limit: 2,
            ..Default::default()
        },
    );
    assert_eq!((got.as_slice(), pages), (&all[5..], 3));
    assert_eq!(
        code(c.messages(
            "s",
            &MessagesQuery {
                tail: 1,
                from: 1,
                ..Default::default()
            }
        ))
        .code,
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(c.messages(
            "s",
            &MessagesQuery {
                from: 5,
                to: 2,
                ..Default::default()
            }
        ))
        .code,
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(c.messages("missing", &MessagesQuery::default())).code,
        ErrorCode::NotFound
    );

    // artifacts: the list without data, one with its bytes
    let list = c.artifacts("s").unwrap();
    assert_eq!(list.generation, g3);
    assert_eq!(list.artifacts, without_data(&full.snapshot.artifacts));
    assert!(list.artifacts.iter().all(|a| a.data.is_none()));
    assert_eq!(
        list.artifacts[0].metadata,
        Some(json!({"label": "plan", "step": 3}))
    );
    assert_eq!(list.artifacts[0].size, 10);
    let one = c.artifact("s", "a1").unwrap();
    assert_eq!(one.generation, g3);
    assert_eq!(one.artifact, full.snapshot.artifacts[0]);
    assert_eq!(one.artifact.bytes().unwrap().unwrap(), b"first plan");
    assert_eq!(c.artifact("s", "a2").unwrap().artifact.path, "src/main.rs");
    let e = code(c.artifact("s", "nope"));
    assert_eq!(e.code, ErrorCode::NotFound, "{e}");
    assert!(e.message.contains("nope"), "{e}");

    // truncate, and truncate + append (replace from index 4 on)
    let g4 = c
        .save(
            "s",
            &Change {
                truncate_messages: Some(4),
                append_messages: vec![json!("n0")],
                ..Change::default()
            },
            Some(g3),
        )
        .unwrap();
    let tail = c
        .messages(
            "s",
            &MessagesQuery {
                tail: 2,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(tail.messages, [msg(3), json!("n0")]);
    assert_eq!((tail.total, tail.from, tail.generation), (5, 3, g4));
    let after = c.resume_session("s").unwrap().snapshot.messages;
    assert_eq!(after[..4], all[..4]);
    assert_eq!(after[4], json!("n0"));
    let since = c
        .messages(
            "s",
            &MessagesQuery {
                since_generation: g3,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(since.messages, [json!("n0")]);
    assert_eq!(since.from, 4);
    let e = code(c.save(
        "s",
        &Change {
            truncate_messages: Some(99),
            ..Change::default()
        },
        None,
    ));
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e}");
    let g5 = c
        .save(
            "s",
            &Change {
                truncate_messages: Some(2),
                ..Change::default()
            },
            Some(g4),
        )
        .unwrap();
    let tail = c
        .messages(
            "s",
            &MessagesQuery {
                tail: 5,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(tail.messages, all[..2]);
    assert_eq!((tail.total, tail.from, tail.generation), (2, 0, g5));
    assert_eq!(c.summary("s").unwrap().message_count, 2);

    // artifacts: put replaces or adds, delete removes, append of a held id
    // is a conflict naming it
    let g6 = c
        .save(
            "s",
            &Change {
                put_artifacts: vec![
                    Artifact {
                        metadata: Some(json!({"label": "plan", "step": 4})),
                        ..Artifact::with_bytes("a1", b"second plan")
                    },
                    Artifact::with_bytes("a3", &[0, 1, 2, 255]),
                ],
                ..Change::default()
            },
            Some(g5),
        )
        .unwrap();
    let a1 = c.artifact("s", "a1").unwrap();
    assert_eq!(a1.generation, g6);
    assert_eq!(a1.artifact.bytes().unwrap().unwrap(), b"second plan");
    assert_eq!(
        a1.artifact.metadata,
        Some(json!({"label": "plan", "step": 4}))
    );
    assert_eq!(a1.artifact.size, 11);
    assert_eq!(
        c.artifact("s", "a3")
            .unwrap()
            .artifact
            .bytes()
            .unwrap()
            .unwrap(),
        [0, 1, 2, 255]
    );
    let full = c.resume_session("s").unwrap();
    let ids: Vec<_> = full
        .snapshot
        .artifacts
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(ids.len(), 3);
    for id in ["a1", "a2", "a3"] {
        assert!(ids.contains(&id), "{ids:?}");
    }
    assert_eq!(
        c.artifacts("s").unwrap().artifacts,
        without_data(&full.snapshot.artifacts)
    );

    let e = code(c.save(
        "s",
        &Change {
            append_artifacts: vec![Artifact::with_bytes("a3", b"again")],
            ..Change::default()
        },
        None,
    ));
    assert_eq!(e.code, ErrorCode::Conflict, "{e}");
    assert!(e.message.contains("a3"), "the error names the id: {e}");
    assert_eq!(
        c.summary("s").unwrap().generation,
        g6,
        "a refused change commits nothing"
    );
    assert_eq!(
        c.artifact("s", "a3")
            .unwrap()
            .artifact
            .bytes()
            .unwrap()
            .unwrap(),
        [0, 1, 2, 255]
    );

    let g7 = c
        .save(
            "s",
            &Change {
                delete_artifacts: vec!["a2".into()],
                ..Change::default()
            },
            Some(g6),
        )
        .unwrap();
    assert_eq!(code(c.artifact("s", "a2")).code, ErrorCode::NotFound);
    let ids: Vec<_> = c
        .artifacts("s")
        .unwrap()
        .artifacts
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert!(
        !ids.contains(&"a2".to_string()) && ids.len() == 2,
        "{ids:?}"
    );
    assert_eq!(c.summary("s").unwrap().artifact_count, 2);
    let e = code(c.save(
        "s",
        &Change {
            delete_artifacts: vec!["a2".into()],
            ..Change::default()
        },
        None,
    ));
    assert_eq!(e.code, ErrorCode::NotFound, "{e}");
    // delete comes before append in one change: together they replace
    c.save(
        "s",
        &Change {
            delete_artifacts: vec!["a3".into()],
            append_artifacts: vec![Artifact::with_bytes("a3", b"third")],
            ..Change::default()
        },
        Some(g7),
    )
    .unwrap();
    assert_eq!(
        c.artifact("s", "a3")
            .unwrap()
            .artifact
            .bytes()
            .unwrap()
            .unwrap(),
        b"third"
    );
}

fn exercise_runs(c: &Client) {
    c.save("o", &Change::append_messages([json!("other")]), None)
        .unwrap();
    c.save("s", &Change::append_messages([json!("start")]), None)
        .unwrap();
    c.begin_run("s", Some("r1")).unwrap();
    c.begin_run("s", Some("quiet")).unwrap();
    let trace = |n: i64| Trace {
        run_id: "r1".into(),
        kind: "tool_call".into(),
        data: Some(json!({"n": n})),
        ..Trace::default()
    };
    c.save(
        "s",
        &Change {
            append_traces: vec![trace(1)],
            ..Change::default()
        },
        None,
    )
    .unwrap();
    let turn = [json!({"role": "tool", "content": "t1"})];
    let cp1 = c
        .checkpoint(&CheckpointRequest {
            run_id: "r1".into(),
            turn: 1,
            new_messages: (&turn[..]).into(),
            tool_calls_count: 1,
            ..Default::default()
        })
        .unwrap();
    c.save(
        "s",
        &Change {
            append_traces: vec![
                trace(2),
                Trace {
                    run_id: "quiet".into(),
                    ..trace(9)
                },
            ],
            ..Change::default()
        },
        None,
    )
    .unwrap();
    let state = json!({"step": 2});
    let cp2 = c
        .checkpoint(&CheckpointRequest {
            run_id: "r1".into(),
            session_id: Some("s".into()),
            turn: 2,
            tool_calls_count: 2,
            state: Some(Cow::Borrowed(&state)),
            ..Default::default()
        })
        .unwrap();
    let full = c.resume_session("s").unwrap();

    // run: the run as the full read has it, with its latest checkpoint
    let r = c.run("r1", Some("s")).unwrap();
    assert_eq!((r.session_id.as_str(), r.generation), ("s", cp2.generation));
    let want = full
        .snapshot
        .runs
        .iter()
        .find(|x| x.run_id == "r1")
        .unwrap();
    assert_eq!(&r.run, want);
    assert_eq!(r.run.status, run_status::RUNNING);
    let cp = r.checkpoint.as_ref().expect("a checkpoint");
    assert_eq!((cp.turn, cp.tool_calls_count), (2, 2));
    assert_eq!(cp.message_count, cp2.message_count);
    assert_eq!(cp.state.as_ref(), Some(&state));
    assert!(r.resumed_as.is_empty());
    assert_eq!(c.run("r1", None).unwrap(), r);
    assert!(c.run("quiet", None).unwrap().checkpoint.is_none());
    assert_eq!(code(c.run("r1", Some("o"))).code, ErrorCode::NotOwner);
    assert_eq!(code(c.run("nope", None)).code, ErrorCode::NotFound);

    // runs: the full read's runs
    let rs = c.runs("s").unwrap();
    assert_eq!(rs.generation, full.generation);
    assert_eq!(rs.runs, full.snapshot.runs);
    assert!(c.runs("o").unwrap().runs.is_empty());

    // runEvents: the run's traces and kept checkpoints, in commit order
    let ev = c.run_events("r1", &RunEventsQuery::default()).unwrap();
    assert_eq!((ev.run_id.as_str(), ev.session_id.as_str()), ("r1", "s"));
    assert_eq!((ev.total, ev.from, ev.next, ev.more), (4, 0, 4, false));
    let kinds: Vec<_> = ev.events.iter().map(|e| e.kind.as_str()).collect();
    use run_event_kind::{CHECKPOINT, TRACE};
    assert_eq!(kinds, [TRACE, CHECKPOINT, TRACE, CHECKPOINT]);
    let traces: Vec<_> = ev.events.iter().filter_map(|e| e.trace.clone()).collect();
    let want: Vec<_> = full
        .snapshot
        .traces
        .iter()
        .filter(|t| t.run_id == "r1")
        .cloned()
        .collect();
    assert_eq!(traces, want);
    let turns: Vec<_> = ev
        .events
        .iter()
        .filter_map(|e| e.checkpoint.as_ref().map(|c| c.turn))
        .collect();
    assert_eq!(turns, [1, 2]);
    assert_eq!(ev.events[1].generation, cp1.generation);
    assert_eq!(ev.events[3].generation, cp2.generation);
    assert!(
        ev.events
            .windows(2)
            .all(|w| w[0].generation <= w[1].generation)
    );
    // paged one by one, the same list
    let mut q = RunEventsQuery {
        session_id: Some("s".into()),
        limit: 1,
        ..Default::default()
    };
    let mut paged = Vec::new();
    loop {
        let p = c.run_events("r1", &q).unwrap();
        assert_eq!(p.events.len(), 1);
        paged.extend(p.events);
        if !p.more {
            break;
        }
        q.from = p.next;
    }
    assert_eq!(paged, ev.events);
    let since = c
        .run_events(
            "r1",
            &RunEventsQuery {
                since_generation: cp1.generation,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(since.events, ev.events[2..]);
    let quiet = c.run_events("quiet", &RunEventsQuery::default()).unwrap();
    assert_eq!(quiet.events.len(), 1);
    assert_eq!(
        quiet.events[0].trace.as_ref().unwrap().data,
        Some(json!({"n": 9}))
    );
    assert_eq!(
        code(c.run_events(
            "r1",
            &RunEventsQuery {
                session_id: Some("o".into()),
                ..Default::default()
            }
        ))
        .code,
        ErrorCode::NotOwner
    );

    // a resumed run names its successor; a completed one keeps no checkpoint
    c.resume_run("r1", Some("s"), Some("r2")).unwrap();
    let r = c.run("r1", Some("s")).unwrap();
    assert_eq!(r.resumed_as, "r2");
    assert_eq!(c.run("r2", None).unwrap().run.parent_run_id, "r1");
    c.complete_run(&CompleteRunRequest {
        run_id: "quiet".into(),
        status: run_status::COMPLETED.into(),
        ..Default::default()
    })
    .unwrap();
    let q = c.run("quiet", None).unwrap();
    assert_eq!(q.run.status, run_status::COMPLETED);
    assert!(q.checkpoint.is_none());
    let runs = c.runs("s").unwrap().runs;
    assert_eq!(runs, c.resume_session("s").unwrap().snapshot.runs);
    assert_eq!(runs.len(), 3);
}

fn exercise_resume_options(c: &Client) {
    let snap = Snapshot {
        messages: (0..6).map(msg).collect(),
        artifacts: vec![Artifact {
            metadata: Some(json!({"k": "v"})),
            ..Artifact::with_bytes("a", b"bytes")
        }],
        traces: vec![Trace {
            kind: "note".into(),
            ..Trace::default()
        }],
        ..Snapshot::default()
    };
    c.save("ro", &snap, None).unwrap();
    let full = c.resume_session("ro").unwrap();
    assert_eq!(
        full.snapshot.artifacts[0].bytes().unwrap().unwrap(),
        b"bytes"
    );
    assert_eq!(full.snapshot.traces.len(), 1);

    let same = c
        .resume_session_with("ro", &ResumeOptions::default())
        .unwrap();
    assert_eq!(same.snapshot, full.snapshot);
    assert_eq!(
        (same.generation, same.message_count, same.messages_from),
        (full.generation, 6, 0)
    );

    let lean = c
        .resume_session_with(
            "ro",
            &ResumeOptions {
                messages_tail: Some(2),
                artifacts: Some(IncludeArtifacts::Metadata),
                traces: Some(IncludeTraces::None),
                drift: Some(false),
                processes: Some(false),
            },
        )
        .unwrap();
    assert_eq!(lean.generation, full.generation);
    assert_eq!(lean.snapshot.messages, full.snapshot.messages[4..]);
    assert_eq!((lean.message_count, lean.messages_from), (6, 4));
    assert_eq!(
        lean.snapshot.artifacts,
        without_data(&full.snapshot.artifacts)
    );
    assert!(lean.snapshot.traces.is_empty());
    assert!(!lean.drift.tracked);
    assert!(lean.processes.is_empty());
    assert_eq!(lean.snapshot.runs, full.snapshot.runs);
    assert_eq!(lean.interrupted_runs, full.interrupted_runs);

    let none = c
        .resume_session_with(
            "ro",
            &ResumeOptions {
                artifacts: Some(IncludeArtifacts::None),
                messages_tail: Some(99),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(none.snapshot.artifacts.is_empty());
    assert_eq!(none.snapshot.messages, full.snapshot.messages);
    assert_eq!(none.snapshot.traces, full.snapshot.traces);
    assert_eq!(none.messages_from, 0);
    assert_eq!(
        code(c.resume_session_with("missing", &ResumeOptions::default())).code,
        ErrorCode::NotFound
    );
}

#[test]
fn reads_embedded() {
    let ws = TempDir::new("rde");
    let c = embedded(&ws);
    exercise_reads(&c);
}

#[test]
fn reads_daemon() {
    let d = Daemon::start("rdd");
    exercise_reads(&d.client);
}

#[test]
fn runs_embedded() {
    let ws = TempDir::new("rne");
    exercise_runs(&embedded(&ws));
}

#[test]
fn runs_daemon() {
    let d = Daemon::start("rnd");
    exercise_runs(&d.client);
}

#[test]
fn resume_options_embedded() {
    let ws = TempDir::new("roe");
    exercise_resume_options(&embedded(&ws));
}

#[test]
fn resume_options_daemon() {
    let d = Daemon::start("rod");
    exercise_resume_options(&d.client);
}
