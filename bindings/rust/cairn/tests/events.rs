//! subscribe: events in commit order, filters, unsubscribe on drop.

mod common;

use std::thread;
use std::time::Duration;

use cairn::*;
use common::*;
use serde_json::json;

fn events_in_commit_order(c: &Client) {
    let mut sub = c.subscribe(&[]).unwrap();
    let mut commits = c.subscribe(&[events::SESSION_COMMITTED]).unwrap();
    const N: u64 = 20;
    // Saves from another thread while this one reads.
    thread::scope(|s| {
        s.spawn(|| {
            for i in 0..N {
                c.save("ev", &Change::append_messages([json!(i)]), None)
                    .unwrap();
            }
        });
        let gens: Vec<u64> = (&mut commits)
            .take(N as usize)
            .map(|e| {
                let e = e.unwrap();
                assert_eq!(e.event, events::SESSION_COMMITTED);
                assert_eq!(e.data["session_id"], "ev");
                e.data["generation"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(gens, (1..=N).collect::<Vec<_>>());
    });
    let run = c.begin_run("ev", Some("r")).unwrap();
    c.checkpoint(&CheckpointRequest {
        run_id: "r".into(),
        turn: 1,
        new_messages: vec![json!("t")].into(),
        ..Default::default()
    })
    .unwrap();
    c.complete_run(&CompleteRunRequest {
        run_id: "r".into(),
        status: run_status::COMPLETED.into(),
        ..Default::default()
    })
    .unwrap();
    c.begin_workflow("w", &[StepSpec::new("a", "1")], None)
        .unwrap();
    c.complete_step("w", "a", "1", None, None).unwrap();
    c.delete("ev").unwrap();

    let mut got = Vec::new();
    while let Some(e) = sub.next_timeout(Duration::from_secs(10)).unwrap() {
        let key = match e.event.as_str() {
            events::SESSION_COMMITTED => format!("commit {}", e.data["generation"]),
            events::RUN_CHECKPOINTED => format!(
                "checkpoint {} {}",
                e.data["run_id"].as_str().unwrap(),
                e.data["turn"]
            ),
            events::RUN_COMPLETED => format!("completed {}", e.data["status"].as_str().unwrap()),
            events::WORKFLOW_STEP_COMPLETED => {
                format!("step {}", e.data["step_id"].as_str().unwrap())
            }
            events::SESSION_DELETED => "deleted".to_string(),
            other => other.to_string(),
        };
        let last = key == "deleted";
        got.push(key);
        if last {
            break;
        }
    }
    let mut want: Vec<String> = (1..=N).map(|g| format!("commit {g}")).collect();
    let g = run.generation;
    want.extend([
        format!("commit {g}"),
        format!("commit {}", g + 1),
        "checkpoint r 1".into(),
        format!("commit {}", g + 2),
        "completed completed".into(),
    ]);
    // Workflow step events may or may not come with a commit of their own:
    // compare the run part exactly, then look for the rest in order.
    assert_eq!(got[..want.len()], want[..], "{got:?}");
    let rest: Vec<&str> = got[want.len()..]
        .iter()
        .map(String::as_str)
        .filter(|k| !k.starts_with("commit"))
        .collect();
    assert_eq!(rest, ["step a", "deleted"]);
    assert_eq!(sub.dropped(), 0);
    // The filtered subscription saw only commits, in order; then a short
    // wait times out.
    let mut last = N;
    while let Some(e) = commits.next_timeout(Duration::from_millis(100)).unwrap() {
        assert_eq!(e.event, events::SESSION_COMMITTED);
        let g = e.data["generation"].as_u64().unwrap();
        assert!(g > last || e.data["session_id"] != "ev", "{e:?}");
        last = g;
    }
    assert!(!commits.is_closed());
    sub.close().unwrap();
}

#[test]
fn events_embedded() {
    let ws = TempDir::new("ev");
    events_in_commit_order(&embedded(&ws));
}

#[test]
fn events_daemon_and_drop_unsubscribes() {
    let d = Daemon::start("dev");
    events_in_commit_order(&d.client);
    let subscribers = || d.client.status().unwrap().daemon.unwrap().subscribers;
    let base = subscribers();
    let sub = d.client.subscribe(&[]).unwrap();
    assert_eq!(subscribers(), base + 1);
    drop(sub);
    assert_eq!(subscribers(), base);
}

#[test]
fn subscription_ends_when_client_closes() {
    let ws = TempDir::new("evc");
    let c = embedded(&ws);
    let sub = c.subscribe(&[]).unwrap();
    let id = sub.id();
    thread::scope(|s| {
        let h = s.spawn(move || sub.count());
        thread::sleep(Duration::from_millis(50));
        c.close().unwrap();
        assert_eq!(h.join().unwrap(), 0);
    });
    // unsubscribing an unknown subscription is not_found
    let c = embedded(&ws);
    let e = c
        .call(
            "unsubscribe",
            format!(r#"{{"subscription":{}}}"#, id + 100).as_bytes(),
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}
