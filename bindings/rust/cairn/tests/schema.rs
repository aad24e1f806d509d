//! The binding checked against the one schema of the wire shapes
//! (api/schema.json) and its fixtures (api/fixtures/<Type>.json), which
//! the Go tests and every binding's share:
//!   - every fixture deserializes into the Rust type of its name and
//!     serializes back to the same JSON value, so a missing field, an extra
//!     field or a misspelt one fails; a fixture without a Rust type fails;
//!   - every method of the schema has a client call (a table of fn
//!     pointers, so the compiler checks each call), and libcairn knows the
//!     method each one sends.
//!
//! The api directory is the repository's (or `$CAIRN_API_DIR`).

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use cairn::*;
use common::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn api_dir() -> PathBuf {
    match std::env::var_os("CAIRN_API_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../api"),
    }
}

/// Whether the repository has the api package yet (a tree from before it
/// has nothing to check against; once api/ exists, its schema and fixtures
/// are required).
fn have_api() -> bool {
    let ok = api_dir().is_dir();
    if !ok {
        eprintln!("skipped: {} does not exist", api_dir().display());
    }
    ok
}

fn read_json(p: &std::path::Path) -> Value {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_json::from_slice(&b).unwrap_or_else(|e| panic!("parse {}: {e}", p.display()))
}

/// Decodes a fixture into T and encodes it again.
type RoundTrip = fn(&Value) -> Result<Value, String>;

fn rt<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(v.clone()).map_err(|e| format!("decode: {e}"))?;
    serde_json::to_value(&t).map_err(|e| format!("encode: {e}"))
}

/// Names each type once: its Go name is the Rust type's name.
macro_rules! types {
    ($($t:ident,)*) => {
        &[$((stringify!($t), rt::<$t>),)*]
    };
}

/// Every type of the schema, by its Go name, and the Rust type that holds
/// it (the same name).
const TYPES: &[(&str, RoundTrip)] = types![
    // package session: the objects
    Snapshot,
    Change,
    Workspace,
    Artifact,
    Trace,
    Usage,
    Run,
    Verification,
    Check,
    SubagentTask,
    Handoff,
    Restart,
    ReviewedVersion,
    NextStep,
    Runtime,
    Process,
    HealthCheck,
    Preview,
    ManifestRef,
    LoopCheckpoint,
    StepRecord,
    Summary,
    Capabilities,
    // package api: params and results
    Empty,
    HelloParams,
    HelloResult,
    HelloCapabilities,
    Limits,
    StatusResult,
    FilesStatus,
    LibStatus,
    SubscribeParams,
    SubscribeResult,
    LibSubscription,
    NextEventParams,
    NextEventResult,
    SessionParams,
    SaveRequest,
    SaveResult,
    Drift,
    InterruptedRun,
    ResumeSessionRequest,
    ResumeSessionResult,
    MessagesRequest,
    MessagesResult,
    ArtifactRequest,
    ArtifactResult,
    ArtifactsResult,
    ArtifactsByIDRequest,
    ArtifactsByIDResult,
    RunRequest,
    RunResult,
    RunsResult,
    RunEvent,
    RunEventsRequest,
    RunEventsResult,
    BeginRunRequest,
    BeginRunResult,
    CheckpointRequest,
    CheckpointResult,
    CompleteRunRequest,
    CompleteRunResult,
    ResumeRunRequest,
    ResumeRunResult,
    StepSpec,
    BeginWorkflowRequest,
    BeginWorkflowResult,
    CompleteStepRequest,
    WorkflowParams,
    ListResult,
    ForkRequest,
    ForkResult,
    ExportResult,
    ImportParams,
    ImportResult,
    ExportFileRequest,
    ExportFileResult,
    ImportFileRequest,
    Problem,
    VerifyReport,
    VerifyRequest,
    SecretScan,
    SecretFinding,
    RepairRequest,
    RepairReport,
    Envelope,
    Workflow,
    ChangesParams,
    ChangeSet,
    HandoffRequest,
    HandoffMissing,
    HandoffResult,
    RuntimeCheckRequest,
    ProcessState,
    PreviewState,
    RuntimeCheckResult,
    RuntimeRestartRequest,
    RestartResult,
    // events
    Event,
    SessionCommittedData,
    SessionDeletedData,
    RunCheckpointedData,
    RunCompletedData,
    RunResumedData,
    WorkflowStepCompletedData,
    FileChangedData,
    DroppedData,
];

/// JSON equality, except that numbers compare by value: JSON does not tell
/// 1 from 1.0, and Go writes a whole float64 without the point.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.is_f64() || y.is_f64()) && x.as_f64() == y.as_f64()
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Where two JSON values differ, as paths, for the failure message.
fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                match g.get(k) {
                    None => out.push(format!("{path}.{k}: dropped (the Rust type lacks it)")),
                    Some(x) => diff(&format!("{path}.{k}"), v, x, out),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: added (the fixture lacks it)"));
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (v, x)) in w.iter().zip(g).enumerate() {
                diff(&format!("{path}[{i}]"), v, x, out);
            }
        }
        _ if same(want, got) => {}
        _ => out.push(format!("{path}: want {want}, got {got}")),
    }
}

#[test]
fn fixtures_round_trip() {
    if !have_api() {
        return;
    }
    let dir = api_dir().join("fixtures");
    let mut seen = BTreeSet::new();
    let mut failures = Vec::new();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let Some((_, round_trip)) = TYPES.iter().find(|(n, _)| *n == name) else {
            failures.push(format!("{name}: no Rust type is mapped to this fixture"));
            continue;
        };
        seen.insert(name.clone());
        let fixture = read_json(&path);
        match round_trip(&fixture) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(back) => {
                let mut d = Vec::new();
                diff("", &fixture, &back, &mut d);
                failures.extend(d.into_iter().map(|x| format!("{name}{x}")));
            }
        }
    }
    assert!(!seen.is_empty(), "no fixtures in {}", dir.display());
    assert!(
        failures.is_empty(),
        "{} fixture failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Calls one method through the client, with whatever arguments (the
/// answer may be an error; only the method's existence is checked).
type Call = fn(&Client) -> Result<()>;

/// Every method of the schema and the client call that sends it.
const METHODS: &[(&str, Call)] = &[
    ("hello", |c| c.hello().map(drop)),
    ("status", |c| c.status().map(drop)),
    ("subscribe", |c| {
        c.subscribe(&[events::SESSION_COMMITTED]).map(drop)
    }),
    ("unsubscribe", |c| c.subscribe(&[])?.close()),
    ("save", |c| {
        c.save("m", &Change::append_messages([json!(1)]), None)
            .map(drop)
    }),
    ("resumeSession", |c| {
        c.resume_session("m")?;
        c.resume_session_with(
            "m",
            &ResumeOptions {
                messages_tail: Some(1),
                artifacts: Some(IncludeArtifacts::Metadata),
                traces: Some(IncludeTraces::None),
                drift: Some(false),
                processes: Some(false),
            },
        )
        .map(drop)
    }),
    ("summary", |c| c.summary("m").map(drop)),
    ("messages", |c| {
        c.messages(
            "m",
            &MessagesQuery {
                tail: 1,
                ..Default::default()
            },
        )
        .map(drop)
    }),
    ("artifact", |c| c.artifact("m", "nope").map(drop)),
    ("artifacts", |c| c.artifacts("m").map(drop)),
    ("artifactsByID", |c| {
        c.artifacts_by_id("m", &["nope"]).map(drop)
    }),
    ("run", |c| c.run("nope", None).map(drop)),
    ("runs", |c| c.runs("m").map(drop)),
    ("runEvents", |c| {
        c.run_events("nope", &RunEventsQuery::default()).map(drop)
    }),
    ("beginRun", |c| c.begin_run("m", None).map(drop)),
    ("checkpoint", |c| {
        c.checkpoint(&CheckpointRequest {
            run_id: "nope".into(),
            turn: 1,
            ..Default::default()
        })
        .map(drop)
    }),
    ("completeRun", |c| {
        c.complete_run(&CompleteRunRequest {
            run_id: "nope".into(),
            status: run_status::COMPLETED.into(),
            ..Default::default()
        })
        .map(drop)
    }),
    ("resumeRun", |c| c.resume_run("nope", None, None).map(drop)),
    ("beginWorkflow", |c| {
        c.begin_workflow("w", &[StepSpec::new("a", "ia")], None)
            .map(drop)
    }),
    ("completeStep", |c| {
        c.complete_step("w", "a", "ia", None, None)
    }),
    ("finishWorkflow", |c| c.finish_workflow("w")),
    ("list", |c| c.list_sessions().map(drop)),
    ("delete", |c| c.delete("nope")),
    ("fork", |c| c.fork("m", "m2", None).map(drop)),
    ("export", |c| c.export("m").map(drop)),
    ("import", |c| c.import(&json!({})).map(drop)),
    // No such session, into no such directory: nothing is written.
    ("exportFile", |c| {
        c.export_file("nope", "/nonexistent/nope.json").map(drop)
    }),
    ("importFile", |c| {
        c.import_file("/nonexistent/nope.json").map(drop)
    }),
    ("verify", |c| c.verify().map(drop)),
    ("repair", |c| {
        c.repair(&RepairRequest::session("m")).map(drop)
    }),
    ("changes", |c| c.changes(None).map(drop)),
    ("handoff", |c| c.handoff("m").map(drop)),
    ("runtime.check", |c| c.runtime_check("m", None).map(drop)),
    ("runtime.restart", |c| {
        c.runtime_restart("m", "nope", None).map(drop)
    }),
];

#[test]
fn every_method_has_a_call() {
    if !have_api() {
        return;
    }
    let schema = read_json(&api_dir().join("schema.json"));
    let methods = schema["methods"]
        .as_array()
        .expect("schema.json: methods is a list");
    let names: BTreeSet<&str> = methods
        .iter()
        .map(|m| m["name"].as_str().expect("a method has a name"))
        .collect();
    assert!(!names.is_empty());
    let table: BTreeSet<&str> = METHODS.iter().map(|(n, _)| *n).collect();
    let missing: Vec<_> = names.difference(&table).collect();
    let extra: Vec<_> = table.difference(&names).collect();
    assert!(
        missing.is_empty(),
        "methods without a client call: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "calls of methods the schema lacks: {extra:?}"
    );

    // Each call reaches libcairn under a name it serves.
    let ws = TempDir::new("sch");
    let c = embedded(&ws);
    for (name, call) in METHODS {
        if let Err(e) = call(&c) {
            assert!(
                !matches!(e.code, ErrorCode::MethodNotFound | ErrorCode::BadRequest),
                "{name}: {e}"
            );
        }
    }
}
