//! Stage 3 of the cross-language scenario (bindings/testdata/scenario.json),
//! in Rust: finish the workflow Python half-did, then report the session's
//! runs. Prints canonical JSON (sorted keys, no spaces) for the driver to
//! compare with bindings/testdata/expected_rust.json byte for byte.
//!
//! usage: cargo run --example xlang_stage -- WORKSPACE CAIRND SCENARIO_JSON

use std::sync::Mutex;

use cairn::{Options, Step};
use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: xlang_stage WORKSPACE CAIRND SCENARIO_JSON");
        std::process::exit(2);
    }
    let sc: Value =
        serde_json::from_str(&std::fs::read_to_string(&args[3]).expect("read scenario"))
            .expect("parse scenario");
    let client = cairn::connect(Options::new(&args[1]).daemon(&args[2])).expect("connect");
    let sid = sc["session_id"].as_str().unwrap();
    let wf = sc["workflow_id"].as_str().unwrap();

    let specs: Vec<Value> = sc["workflow_steps"].as_array().unwrap().clone();
    let begun: Value = client
        .call_json(
            "beginWorkflow",
            &json!({"workflow_id": wf, "session_id": sid,
                    "steps": specs.iter().map(|s| json!({"step_id": s["step_id"], "identity": s["identity"]})).collect::<Vec<_>>()}),
        )
        .expect("beginWorkflow");
    let completed_before: Vec<Value> = begun["completed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step_id"].clone())
        .collect();

    let ran = Mutex::new(Vec::new());
    let steps: Vec<Step<'_, Value, String>> = specs
        .iter()
        .map(|s| {
            let id = s["step_id"].as_str().unwrap().to_string();
            let result = s["result"].clone();
            let ran = &ran;
            Step::new(id.clone(), s["identity"].as_str().unwrap(), move || {
                ran.lock().unwrap().push(id);
                Ok(result)
            })
        })
        .collect();
    let results = client
        .parallel_resumable_in(steps, wf, Some(sid))
        .expect("parallel_resumable");
    client.finish_workflow(wf).expect("finishWorkflow");
    // Finishing deleted the checkpoint: opening the same workflow again finds
    // no completed step, and there is nothing left to finish.
    let reopened: Value = client
        .call_json(
            "beginWorkflow",
            &json!({"workflow_id": wf,
                    "steps": specs.iter().map(|s| json!({"step_id": s["step_id"], "identity": s["identity"]})).collect::<Vec<_>>()}),
        )
        .expect("beginWorkflow after finish");
    let after = match (
        reopened["completed"].as_array().map_or(0, |a| a.len()),
        client.finish_workflow(wf),
    ) {
        (0, Err(e)) if e.code == cairn::ErrorCode::NotFound => "not_found",
        (n, r) => panic!("workflow survived finish: {n} completed steps, finish again: {r:?}"),
    };

    // The order steps ran in is up to the thread pool: report it in spec order.
    let mut ran = ran.into_inner().unwrap();
    let order: Vec<String> = specs
        .iter()
        .map(|s| s["step_id"].as_str().unwrap().to_string())
        .collect();
    ran.sort_by_key(|id| order.iter().position(|o| o == id));

    let resumed: Value = client
        .call_json("resumeSession", &json!({"session_id": sid}))
        .expect("resumeSession");
    let snap = &resumed["snapshot"];
    let runs: Vec<Value> = snap["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!({"run_id": r["run_id"], "status": r["status"],
                   "parent_run_id": r.get("parent_run_id").cloned().unwrap_or(Value::Null),
                   "tool_calls_count": r["tool_calls_count"]})
        })
        .collect();
    let out = json!({
        "completed_before": completed_before,
        "ran": ran,
        "results": results,
        "runs": runs,
        "message_count": snap["messages"].as_array().unwrap().len(),
        "workflow_after_finish": after,
    });
    println!("{}", serde_json::to_string(&out).unwrap());
}
