//! Handles come back: alone in its own process, so the count is exact.

mod common;

use cairn::*;
use common::*;
use serde_json::json;

#[test]
fn handles_and_subscriptions_are_released() {
    assert_eq!(cairn::open_handles(), 0);
    let ws = TempDir::new("leak");
    for _ in 0..3 {
        let c = embedded(&ws);
        assert_eq!(cairn::open_handles(), 1);
        let sub = c.subscribe(&[]).unwrap();
        c.save("s", &Change::append_messages([json!(1)]), None)
            .unwrap();
        drop(sub);
        drop(c); // Drop closes, releasing the lock for the next round
        assert_eq!(cairn::open_handles(), 0);
    }
    let c = embedded(&ws);
    c.close().unwrap();
    assert_eq!(cairn::open_handles(), 0);
    drop(c);
    assert_eq!(cairn::open_handles(), 0);
    // a failed connect leaves nothing open
    assert!(cairn::connect(Options::new(ws.path().join("nope")).embedded(true)).is_err());
    assert_eq!(cairn::open_handles(), 0);
}
