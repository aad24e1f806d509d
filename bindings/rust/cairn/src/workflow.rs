//! `parallel_resumable`: a resumable workflow's steps over scoped threads.

use std::collections::HashMap;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::thread;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::Client;
use crate::error::{Error, ErrorCode};
use crate::types::StepSpec;

type StepFn<'s, T, E> = Box<dyn FnOnce() -> Result<T, E> + Send + 's>;

/// One step of [`Client::parallel_resumable`]: its id, the identity (a
/// digest of its spec: change it and the workflow fails closed with
/// `step_identity_changed`), and the function that does the work.
pub struct Step<'s, T, E> {
    pub step_id: String,
    pub identity: String,
    run: StepFn<'s, T, E>,
}

impl<'s, T, E> Step<'s, T, E> {
    /// A step running `f`.
    pub fn new(
        step_id: impl Into<String>,
        identity: impl Into<String>,
        f: impl FnOnce() -> Result<T, E> + Send + 's,
    ) -> Step<'s, T, E> {
        Step {
            step_id: step_id.into(),
            identity: identity.into(),
            run: Box::new(f),
        }
    }
}

impl<T, E> fmt::Debug for Step<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step")
            .field("step_id", &self.step_id)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// Why [`Client::parallel_resumable`] failed.
#[derive(Debug)]
pub enum WorkflowError<E> {
    /// A cairn call failed (beginWorkflow, a completeStep, or decoding a
    /// recorded result).
    Cairn(Error),
    /// A step's function returned an error.
    Step { step_id: String, error: E },
}

impl<E> WorkflowError<E> {
    /// The cairn error code, when a cairn call failed.
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            WorkflowError::Cairn(e) => Some(&e.code),
            WorkflowError::Step { .. } => None,
        }
    }
}

impl<E> From<Error> for WorkflowError<E> {
    fn from(e: Error) -> WorkflowError<E> {
        WorkflowError::Cairn(e)
    }
}

impl<E: fmt::Display> fmt::Display for WorkflowError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkflowError::Cairn(e) => e.fmt(f),
            WorkflowError::Step { step_id, error } => {
                write!(f, "workflow step {step_id} failed: {error}")
            }
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for WorkflowError<E> {}

/// The most steps run at once.
fn pool_size(pending: usize) -> usize {
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    pending.min(cpus + 4).clamp(1, 32)
}

struct Job<'s, T, E> {
    index: usize,
    step_id: String,
    identity: String,
    run: StepFn<'s, T, E>,
}

pub(crate) fn run<'s, T, E>(
    client: &Client,
    specs: Vec<Step<'s, T, E>>,
    workflow_id: &str,
    session_id: Option<&str>,
) -> Result<Vec<T>, WorkflowError<E>>
where
    T: Serialize + DeserializeOwned + Send,
    E: Send,
{
    let ids: Vec<StepSpec> = specs
        .iter()
        .map(|s| StepSpec::new(&s.step_id, &s.identity))
        .collect();
    let completed = client.begin_workflow(workflow_id, &ids, session_id)?;
    let mut recorded: HashMap<String, Option<serde_json::Value>> = completed
        .into_iter()
        .map(|r| (r.step_id, r.result))
        .collect();

    let n = specs.len();
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut jobs = Vec::new();
    for (index, step) in specs.into_iter().enumerate() {
        match recorded.remove(&step.step_id) {
            Some(value) => {
                let v = serde_json::from_value(value.unwrap_or(serde_json::Value::Null)).map_err(
                    |e| {
                        Error::new(
                            ErrorCode::InvalidArgument,
                            format!(
                                "the recorded result of step {} does not decode: {e}",
                                step.step_id
                            ),
                        )
                    },
                )?;
                results[index] = Some(v);
            }
            None => jobs.push(Job {
                index,
                step_id: step.step_id,
                identity: step.identity,
                run: step.run,
            }),
        }
    }
    if jobs.is_empty() {
        return Ok(results
            .into_iter()
            .map(|r| r.expect("every step has a result"))
            .collect());
    }

    let workers = pool_size(jobs.len());
    let queue = Mutex::new(jobs.into_iter());
    let results = Mutex::new(results);
    let failure: Mutex<Option<WorkflowError<E>>> = Mutex::new(None);
    let panicked: Mutex<Option<Box<dyn std::any::Any + Send>>> = Mutex::new(None);

    let fail = |e: WorkflowError<E>| {
        let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e);
        }
    };

    thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let job = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                    let Some(job) = job else { break };
                    let out = match panic::catch_unwind(AssertUnwindSafe(job.run)) {
                        Ok(out) => out,
                        Err(payload) => {
                            panicked
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(payload);
                            continue;
                        }
                    };
                    match out {
                        Ok(v) => {
                            let recorded = serde_json::to_value(&v)
                                .map_err(|e| {
                                    Error::encode(&format!("the result of step {}", job.step_id), e)
                                })
                                .and_then(|json| {
                                    client.complete_step(
                                        workflow_id,
                                        &job.step_id,
                                        &job.identity,
                                        Some(&json),
                                        session_id,
                                    )
                                });
                            match recorded {
                                Ok(()) => {
                                    results.lock().unwrap_or_else(|p| p.into_inner())[job.index] =
                                        Some(v)
                                }
                                Err(e) => fail(WorkflowError::Cairn(e)),
                            }
                        }
                        Err(error) => fail(WorkflowError::Step {
                            step_id: job.step_id,
                            error,
                        }),
                    }
                }
            });
        }
    });

    if let Some(payload) = panicked.into_inner().unwrap_or_else(|p| p.into_inner()) {
        panic::resume_unwind(payload);
    }
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every step has a result"))
        .collect())
}
