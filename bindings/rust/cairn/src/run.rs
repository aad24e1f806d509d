//! The run helper: a host with its own agent loop hands each finished tool
//! turn to [`AgentRun::turn`], and cairn checkpoints it (the turn's
//! messages, its number, the running usage and tool-call totals and an
//! optional state) in one commit. Nothing is written while a turn is under
//! way, so a process killed in the middle of a tool call resumes from the
//! last finished turn. [`AgentRun::complete`] ends the run; a run never
//! completed (an error, a crash) is left running, for
//! [`Client::start_run`] with `resume` to pick up with its counters.
//!
//! A turn whose checkpoint fails with [`ErrorCode::Unavailable`] (a lost
//! connection, a call timeout: the outcome is unknown) is settled by the
//! next call: [`AgentRun::turn`] (or [`AgentRun::complete`],
//! [`AgentRun::fail`]) first reads the run to learn whether that checkpoint
//! was committed. If it was, the helper counts it; a `turn` with the same
//! arguments (the same JSON values: numbers by value, so `1` and `1.0` are
//! one, objects whatever their key order) is then the host retrying it and
//! returns its number without saving it twice, and any other `turn` is the
//! next one. If it was not, the turn is saved anew. So a host may retry a
//! failed turn, or go on, and the run holds each turn once.

use std::borrow::Cow;

use serde_json::{Number, Value};

use crate::client::{Client, Save};
use crate::error::{Error, ErrorCode, Result};
use crate::types::{
    CheckpointRequest, CompleteRunRequest, IncludeArtifacts, IncludeTraces, ResumeOptions,
    Snapshot, Usage, run_status,
};

/// How [`Client::start_run`] starts a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions<'a> {
    /// Pick up the session's interrupted run (the latest, when there are
    /// several) from its last finished turn; without one, a new run starts.
    pub resume: bool,
    /// The new run's id (`None`: cairn makes one).
    pub run_id: Option<&'a str>,
}

impl RunOptions<'_> {
    /// Options that resume the session's interrupted run, if it has one.
    pub fn resume() -> RunOptions<'static> {
        RunOptions {
            resume: true,
            run_id: None,
        }
    }
}

/// One finished tool turn, as [`AgentRun::turn`] saves it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn<'a> {
    /// The turn's new messages.
    pub messages: &'a [Value],
    /// What the turn spent; added to the run's totals.
    pub usage: Usage,
    /// How many tool calls the turn made.
    pub tool_calls: i64,
    /// A state to resume with.
    pub state: Option<&'a Value>,
}

/// One agent run of a session, checkpointed turn by turn; made by
/// [`Client::start_run`] or [`Client::with_run`].
#[derive(Debug)]
pub struct AgentRun<'c> {
    client: &'c Client,
    session_id: String,
    run_id: String,
    resumed_from: Option<String>,
    messages: Vec<Value>,
    turns: i64,
    usage: Usage,
    tool_calls_count: i64,
    state: Option<Value>,
    done: bool,
    /// The last turn, when its checkpoint's outcome is unknown.
    unsure: Option<Unsure>,
}

/// A turn whose checkpoint failed with `Unavailable`: the turn number and
/// run totals it would commit, and the arguments it was given (owned).
#[derive(Debug)]
struct Unsure {
    turn: i64,
    usage: Usage,
    tool_calls_count: i64,
    messages: Vec<Value>,
    turn_usage: Usage,
    turn_tool_calls: i64,
    state: Option<Value>,
}

impl Unsure {
    /// Whether `t` is the turn this attempt was given: the same JSON
    /// values (see [`same_value`]), usage and tool calls.
    fn same(&self, t: &Turn<'_>) -> bool {
        same_values(&self.messages, t.messages)
            && self.turn_usage == t.usage
            && self.turn_tool_calls == t.tool_calls
            && match (&self.state, t.state) {
                (Some(a), Some(b)) => same_value(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// Whether `a` and `b` are the same JSON value, as the Go helper (and the
/// Python and Node.js ones) compare a retried turn's: numbers by their
/// value however written (1 and 1.0 are one number), booleans never equal
/// to numbers, objects whatever the order of their members, arrays in
/// order.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x, y),
        (Value::Array(x), Value::Array(y)) => same_values(x, y),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `a` and `b` hold the same JSON values, in order.
fn same_values(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_value(x, y))
}

/// Whether `x` and `y` are the same number exactly: two integers as
/// integers, an integer and a float when the float is integral and that
/// integer, two floats by `==`.
fn same_number(x: &Number, y: &Number) -> bool {
    match (integer(x), integer(y)) {
        (Some(i), Some(j)) => i == j,
        (Some(i), None) => y.as_f64().is_some_and(|f| float_is(f, i)),
        (None, Some(j)) => x.as_f64().is_some_and(|f| float_is(f, j)),
        (None, None) => x.as_f64() == y.as_f64(),
    }
}

/// An integer's value (i64 and u64 alike); None for a float.
fn integer(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Whether the float `f` is exactly the integer `i`.
fn float_is(f: f64, i: i128) -> bool {
    // ±2^127: every integral float between them is an i128.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    f.is_finite() && f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f) && f as i128 == i
}

fn add_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
        total_tokens: a.total_tokens + b.total_tokens,
        cost: a.cost + b.cost,
    }
}

impl Client {
    /// Starts a run of `session_id` (creating the session when it does not
    /// exist), or with `options.resume` picks up its interrupted run with
    /// the turn, usage, tool-call count and state it had checkpointed.
    pub fn start_run(&self, session_id: &str, options: &RunOptions<'_>) -> Result<AgentRun<'_>> {
        if options.resume {
            let found = self.resume_session_with(
                session_id,
                &ResumeOptions {
                    messages_tail: Some(0),
                    artifacts: Some(IncludeArtifacts::None),
                    traces: Some(IncludeTraces::None),
                    drift: Some(false),
                    processes: Some(false),
                },
            );
            let interrupted = match found {
                Ok(r) => r.interrupted_runs,
                Err(e) if e.code == ErrorCode::NotFound => Vec::new(),
                Err(e) => return Err(e),
            };
            if let Some(last) = interrupted.last() {
                let r = self.resume_run(&last.run_id, Some(session_id), options.run_id)?;
                return Ok(AgentRun {
                    client: self,
                    session_id: session_id.to_string(),
                    run_id: r.run_id,
                    resumed_from: Some(r.resumed_from),
                    messages: r.messages,
                    turns: r.turn,
                    usage: r.usage,
                    tool_calls_count: r.tool_calls_count,
                    state: r.state,
                    done: false,
                    unsure: None,
                });
            }
        }
        self.ensure_session(session_id)?;
        let r = self.begin_run(session_id, options.run_id)?;
        Ok(AgentRun {
            client: self,
            session_id: session_id.to_string(),
            run_id: r.run_id,
            resumed_from: None,
            messages: Vec::new(),
            turns: 0,
            usage: Usage::default(),
            tool_calls_count: 0,
            state: None,
            done: false,
            unsure: None,
        })
    }

    /// Starts a run (as [`Client::start_run`]), calls `f` with it and
    /// completes it when `f` returns `Ok`. When `f` fails the run is left
    /// as a crash leaves it, to be resumed.
    pub fn with_run<T, E: From<Error>>(
        &self,
        session_id: &str,
        options: &RunOptions<'_>,
        f: impl FnOnce(&mut AgentRun<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut run = self.start_run(session_id, options)?;
        let out = f(&mut run)?;
        run.complete()?;
        Ok(out)
    }

    // Creates session_id, empty, when it does not exist: beginRun needs
    // one. A racing creator wins (generation 0 expected); its session is
    // as good.
    fn ensure_session(&self, session_id: &str) -> Result<()> {
        match self.summary(session_id) {
            Ok(_) => return Ok(()),
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(e) => return Err(e),
        }
        match self.save(session_id, Save::Snapshot(&Snapshot::default()), Some(0)) {
            Ok(_) => Ok(()),
            Err(e) if e.code == ErrorCode::Conflict => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl AgentRun<'_> {
    /// The session the run writes to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The run's id; a resumed run has a new one (see `resumed_from`).
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run this one resumed, if it resumed one.
    pub fn resumed_from(&self) -> Option<&str> {
        self.resumed_from.as_deref()
    }

    /// On resume, the session's messages up to the last finished turn.
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// The last finished turn (0 before the first).
    pub fn turns(&self) -> i64 {
        self.turns
    }

    /// The usage over the run line, resumed runs included.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The tool calls over the run line, resumed runs included.
    pub fn tool_calls_count(&self) -> i64 {
        self.tool_calls_count
    }

    /// The state saved with the last finished turn, if any.
    pub fn state(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    /// Checkpoints one finished turn and returns its number. The totals
    /// change only when the checkpoint is saved.
    ///
    /// When the checkpoint fails with [`ErrorCode::Unavailable`] its
    /// outcome is unknown: the next `turn` (or `complete`, `fail`) reads
    /// the run first. If that checkpoint was committed it is counted, and
    /// a `turn` equal to it (messages, usage, tool calls, state; JSON
    /// numbers by value) is the host's retry, answered with its number and
    /// not saved again; any other turn follows it. If it was not, this
    /// turn takes its number. An error reading the run is returned and the
    /// question stays open.
    pub fn turn(&mut self, turn: &Turn<'_>) -> Result<i64> {
        if self.done {
            return Err(Error::new(
                ErrorCode::Conflict,
                format!("turn: run {} is finished", self.run_id),
            ));
        }
        if self.settle()?.is_some_and(|u| u.same(turn)) {
            return Ok(self.turns); // the host retrying the turn that was committed
        }
        let n = self.turns + 1;
        let usage = add_usage(self.usage, turn.usage);
        let tools = self.tool_calls_count + turn.tool_calls;
        let r = self.client.checkpoint(&CheckpointRequest {
            run_id: Cow::Borrowed(&self.run_id),
            session_id: Some(Cow::Borrowed(&self.session_id)),
            turn: n,
            new_messages: Cow::Borrowed(turn.messages),
            usage,
            tool_calls_count: tools,
            state: turn.state.map(Cow::Borrowed),
        });
        if let Err(e) = r {
            if e.code == ErrorCode::Unavailable {
                self.unsure = Some(Unsure {
                    turn: n,
                    usage,
                    tool_calls_count: tools,
                    messages: turn.messages.to_vec(),
                    turn_usage: turn.usage,
                    turn_tool_calls: turn.tool_calls,
                    state: turn.state.cloned(),
                });
            }
            return Err(e);
        }
        self.commit(n, usage, tools, turn.state);
        Ok(n)
    }

    fn commit(&mut self, n: i64, usage: Usage, tools: i64, state: Option<&Value>) {
        self.turns = n;
        self.usage = usage;
        self.tool_calls_count = tools;
        if let Some(s) = state {
            self.state = Some(s.clone());
        }
    }

    /// Learns whether the turn whose outcome was unknown was committed
    /// (the run's checkpoint has reached it) and, if so, counts it and
    /// returns it; `None` otherwise. An error reading the run is returned
    /// and the turn stays unsettled.
    fn settle(&mut self) -> Result<Option<Unsure>> {
        let Some(n) = self.unsure.as_ref().map(|u| u.turn) else {
            return Ok(None);
        };
        let r = self.client.run(&self.run_id, Some(&self.session_id))?;
        let u = self.unsure.take().expect("unsure");
        if r.checkpoint.map_or(0, |c| c.turn) < n {
            return Ok(None);
        }
        self.commit(u.turn, u.usage, u.tool_calls_count, u.state.as_ref());
        Ok(Some(u))
    }

    /// Ends the run as completed, with its totals. Completing again does
    /// nothing.
    pub fn complete(&mut self) -> Result<()> {
        self.end(run_status::COMPLETED)
    }

    /// Ends the run as failed: it can no longer be resumed.
    pub fn fail(&mut self) -> Result<()> {
        self.end(run_status::FAILED)
    }

    fn end(&mut self, status: &str) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.settle()?;
        self.client.complete_run(&CompleteRunRequest {
            run_id: Cow::Borrowed(&self.run_id),
            session_id: Some(Cow::Borrowed(&self.session_id)),
            status: Cow::Borrowed(status),
            usage: Some(self.usage),
            tool_calls_count: Some(self.tool_calls_count),
        })?;
        self.done = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same(a: Value, b: Value) -> bool {
        let (ab, ba) = (same_value(&a, &b), same_value(&b, &a));
        assert_eq!(ab, ba, "{a} and {b}: not symmetric");
        ab
    }

    #[test]
    fn same_value_compares_numbers_by_value() {
        assert!(same(json!(1), json!(1.0)));
        assert!(same(json!(-1), json!(-1.0)));
        assert!(same(json!(0), json!(-0.0)));
        assert!(same(json!(1.5), json!(1.5)));
        assert!(same(json!(u64::MAX), json!(u64::MAX)));
        assert!(same(json!(i64::MIN), json!(-9223372036854775808.0)));
        assert!(!same(json!(1), json!(1.5)));
        assert!(!same(json!(1), json!(2)));
        assert!(!same(json!(1.5), json!(2.5)));
        // 2^63: a u64, above i64::MAX, and the float of the same value.
        assert!(same(json!(1u64 << 63), json!(9223372036854775808.0)));
        assert!(!same(json!(1u64 << 63), json!(i64::MAX)));
        assert!(!same(json!(1u64 << 63), json!(9223372036854777856.0)));
        assert!(!same(json!(u64::MAX), json!(-1)));
        // 2^53 + 1 has no float: the nearest one is another number.
        assert!(!same(json!(9007199254740993u64), json!(9007199254740992.0)));
        assert!(same(json!(9007199254740992u64), json!(9007199254740992.0)));
        // Beyond any integer of JSON's.
        assert!(!same(json!(u64::MAX), json!(1e300)));
        assert!(!same(json!(i64::MIN), json!(-1e300)));
    }

    #[test]
    fn same_value_keeps_kinds_apart() {
        assert!(!same(json!(true), json!(1)));
        assert!(!same(json!(false), json!(0)));
        assert!(!same(json!(false), json!(0.0)));
        assert!(!same(json!(null), json!(0)));
        assert!(!same(json!("1"), json!(1)));
        assert!(!same(json!([1]), json!(1)));
        assert!(!same(json!({}), json!([])));
        assert!(same(json!(true), json!(true)));
        assert!(same(json!(null), json!(null)));
        assert!(same(json!("é"), json!("é")));
        assert!(!same(json!("a"), json!("b")));
    }

    #[test]
    fn same_value_nests() {
        let a = json!({"a": 1, "b": [1, 2.5, {"c": [true, null, 3]}], "d": {}});
        let b = json!({"d": {}, "b": [1.0, 2.5, {"c": [true, null, 3.0]}], "a": 1.0});
        assert!(same(a.clone(), b));
        // Arrays in order.
        assert!(!same(json!([1, 2]), json!([2, 1])));
        assert!(!same(json!([1, 2]), json!([1, 2, 3])));
        // Every member, with the same key.
        assert!(!same(json!({"a": 1}), json!({"a": 1, "b": 2})));
        assert!(!same(json!({"a": 1}), json!({"b": 1})));
        assert!(!same(
            a,
            json!({"a": 1, "b": [1, 2.5, {"c": [true, null, 4]}], "d": {}})
        ));
    }

    #[test]
    fn unsure_same_turn() {
        let msgs = [json!({"t": 2, "k": [1, 2]})];
        let state = json!({"s": 1});
        let u = Unsure {
            turn: 2,
            usage: Usage::default(),
            tool_calls_count: 1,
            messages: msgs.to_vec(),
            turn_usage: Usage {
                input_tokens: 3,
                ..Usage::default()
            },
            turn_tool_calls: 1,
            state: Some(state.clone()),
        };
        let again = [json!({"k": [1.0, 2.0], "t": 2.0})];
        let state2 = json!({"s": 1.0});
        let t = Turn {
            messages: &again,
            usage: u.turn_usage,
            tool_calls: 1,
            state: Some(&state2),
        };
        assert!(u.same(&t));
        assert!(!u.same(&Turn {
            state: None,
            ..t.clone()
        }));
        assert!(!u.same(&Turn {
            state: Some(&json!({"s": true})),
            ..t.clone()
        }));
        assert!(!u.same(&Turn {
            messages: &[],
            ..t.clone()
        }));
        assert!(!u.same(&Turn {
            messages: &[json!({"t": 2.5, "k": [1, 2]})],
            ..t.clone()
        }));
        assert!(!u.same(&Turn {
            tool_calls: 2,
            ..t.clone()
        }));
        assert!(!u.same(&Turn {
            usage: Usage::default(),
            ..t
        }));
        let none = Unsure { state: None, ..u };
        assert!(none.same(&Turn {
            messages: &again,
            usage: none.turn_usage,
            tool_calls: 1,
            state: None,
        }));
    }
}
