//! `Options::store` keeps the sessions in PostgreSQL: two workspaces (two
//! "hosts") share them. The server is internal/pgtest/pgserve
//! (`CAIRN_PGSERVE`, else `go run`), a real PostgreSQL from the machine's
//! binaries; without them the test fails, unless `CAIRN_SKIP_PG=1`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use cairn::{Change, MessagesQuery, Options};
use common::TempDir;

#[test]
fn store_option_shares_sessions_across_workspaces() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let mut cmd = match std::env::var_os("CAIRN_PGSERVE") {
        Some(p) if !p.is_empty() => Command::new(p),
        _ => {
            let mut c = Command::new("go");
            c.args(["run", "./internal/pgtest/pgserve"]);
            c
        }
    };
    let mut server = cmd
        .arg("rustbind")
        .current_dir(&repo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start pgserve");
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_string();
    if url.is_empty() {
        let status = server.wait().unwrap();
        if status.code() == Some(4) {
            eprintln!("CAIRN_SKIP_PG=1: skipping");
            return;
        }
        panic!("pgserve exited {status} without a database");
    }
    {
        let (wa, wb) = (TempDir::new("pga"), TempDir::new("pgb"));
        let a = cairn::connect(Options::new(wa.path()).embedded(true).store(url.clone())).unwrap();
        a.save(
            "rs-s",
            &Change::append_messages([serde_json::json!({"role": "user"})]),
            None,
        )
        .unwrap();
        drop(a);
        assert!(!wa.path().join(".cairn/sessions").exists());
        let b = cairn::connect(Options::new(wb.path()).embedded(true).store(url.clone())).unwrap();
        assert_eq!(
            b.messages("rs-s", &MessagesQuery::default()).unwrap().total,
            1
        );
    }
    drop(server.stdin.take());
    server.wait().unwrap();
}
