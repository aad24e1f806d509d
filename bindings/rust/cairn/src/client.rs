//! The client: one libcairn handle and the cairn operations over it.

use std::borrow::Cow;
use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, ErrorCode, Result};
use crate::ffi;
use crate::types::*;
use crate::wire::{self, Wire};

/// How to connect (`cairn_open`'s options).
#[derive(Debug, Clone, Serialize)]
pub struct Options {
    /// The workspace directory. Empty (the default): found as git finds a
    /// repository, the nearest folder at or above the current directory
    /// holding `.cairn/`, else the nearest repository root (`.git`), else
    /// the current directory.
    pub workspace: PathBuf,
    /// false (default): talk to the workspace's daemon, cairnd, starting it
    /// when none runs. true: run the engine in this process over
    /// `<workspace>/.cairn`; this takes the workspace's store lock, so no
    /// daemon can serve the workspace meanwhile (`locked` otherwise).
    pub embedded: bool,
    /// The cairnd executable to start (default: `$CAIRN_DAEMON`, then, with
    /// a static libcairn, the `cairnd` cairn-sys built beside it
    /// ([`cairn_sys::DAEMON`]) while that file exists, then `cairnd` in the
    /// directory of the loaded libcairn, then next to the running
    /// executable, then on `PATH`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon: Option<PathBuf>,
    /// Extra arguments for a daemon this connection starts, such as
    /// `--idle-timeout=30s`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub daemon_args: Vec<String>,
    /// false: fail with `unavailable` instead of starting a daemon
    /// (default true).
    pub auto_start: bool,
    /// A `postgres://` URL: keep the sessions in that PostgreSQL database,
    /// shared with every host using it (cairn_open's `store`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Daemon mode: how long a call waits for the daemon, its request's
    /// write included, before it fails with `unavailable`
    /// (`protocol: no answer to <method> from cairnd within <bound>: the
    /// outcome is unknown ...`, the bound as Go prints a duration: `400ms`,
    /// `1.5s`, `1m0s`): a request that reached the daemon may still be
    /// carried out. None (the default): libcairn's default, 5 minutes,
    /// long enough that only a daemon that is stopped or stuck reaches it,
    /// so a slow commit never fails early. Zero: no bound, a call waits as
    /// long as the daemon takes. Passed as cairn_open's `call_timeout_ms`,
    /// rounded up to whole milliseconds; more than one day fails
    /// [`connect`] with `invalid_argument`. It never bounds the methods
    /// whose work grows with the store or that have a timeout of their
    /// own: `verify`, `repair`, `export`, `export_file`, `import`,
    /// `import_file`, `fork`, `runtime_check`, `runtime_restart`.
    /// Daemon-mode checkpoints sent on the client's own connection are
    /// bounded alike. Embedded mode ignores it.
    #[serde(
        rename = "call_timeout_ms",
        serialize_with = "call_timeout_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub call_timeout: Option<Duration>,
}

/// `call_timeout` as cairn_open's `call_timeout_ms` (see [`millis_up`]).
fn call_timeout_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.map_or(0, millis_up))
}

impl Default for Options {
    fn default() -> Options {
        Options {
            workspace: PathBuf::new(),
            embedded: false,
            daemon: None,
            daemon_args: Vec::new(),
            auto_start: true,
            store: None,
            call_timeout: None,
        }
    }
}

impl Options {
    /// Default options for `workspace`.
    pub fn new(workspace: impl Into<PathBuf>) -> Options {
        Options {
            workspace: workspace.into(),
            ..Options::default()
        }
    }

    /// Chooses embedded (true) or daemon (false) mode.
    pub fn embedded(mut self, embedded: bool) -> Options {
        self.embedded = embedded;
        self
    }

    /// Names the cairnd executable to start.
    pub fn daemon(mut self, path: impl Into<PathBuf>) -> Options {
        self.daemon = Some(path.into());
        self
    }

    /// Sets extra arguments for a daemon this connection starts.
    pub fn daemon_args<I, S>(mut self, args: I) -> Options
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.daemon_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Keeps the sessions in the PostgreSQL database at `url`.
    pub fn store(mut self, url: impl Into<String>) -> Options {
        self.store = Some(url.into());
        self
    }

    /// Chooses whether a missing daemon is started.
    pub fn auto_start(mut self, auto_start: bool) -> Options {
        self.auto_start = auto_start;
        self
    }

    /// Bounds each daemon-mode call's wait for the daemon, its request's
    /// write included (the `call_timeout` field says how, and which
    /// methods it never bounds); `Duration::ZERO`: no bound. Without it:
    /// libcairn's default, 5 minutes.
    pub fn call_timeout(mut self, timeout: Duration) -> Options {
        self.call_timeout = Some(timeout);
        self
    }
}

/// Opens a client (see [`Options`]).
pub fn connect(options: Options) -> Result<Client> {
    Client::connect(options)
}

/// What `save` commits: a whole snapshot or a delta.
#[derive(Debug, Clone, Copy)]
pub enum Save<'a> {
    Snapshot(&'a Snapshot),
    Change(&'a Change),
}

impl<'a> From<&'a Snapshot> for Save<'a> {
    fn from(s: &'a Snapshot) -> Save<'a> {
        Save::Snapshot(s)
    }
}

impl<'a> From<&'a Change> for Save<'a> {
    fn from(c: &'a Change) -> Save<'a> {
        Save::Change(c)
    }
}

/// A connection to cairn: a libcairn handle, in daemon or embedded mode.
///
/// `Client` is `Send + Sync`: share it between threads (by reference, in an
/// `Arc`, or with scoped threads); libcairn runs concurrent calls on one
/// handle safely. Every call runs on the calling thread through
/// `cairn_call`. Dropping the client closes it.
///
/// The fork rule: the Go runtime inside libcairn does not survive `fork()`
/// without `exec()`; a client used in a forked child fails every call with
/// [`ErrorCode::Forked`]. Connect in the exec'd process instead.
///
/// In daemon mode, [`Client::checkpoint`] speaks the wire protocol itself,
/// on a connection of the client's own to the workspace's cairnd, when it
/// can send the call exactly as libcairn would (the crate's README says
/// when; `CAIRN_RUST_WIRE=0` turns it off); every other call goes through
/// libcairn.
#[derive(Debug)]
pub struct Client {
    handle: u64,
    closed: AtomicBool,
    /// Daemon mode's own connection for checkpoint (src/wire.rs); None in
    /// embedded mode or with CAIRN_RUST_WIRE=0.
    wire: Option<Wire>,
}

/// A duration in whole milliseconds, at least 1 for a non-zero one.
fn millis(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 && !d.is_zero() { 1 } else { ms }
}

/// A duration in whole milliseconds rounded up, as cairn_open's
/// `call_timeout_ms` takes it: saturated at i64::MAX (Go's int64), so a
/// value out of its range reaches libcairn, which reports it.
fn millis_up(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000))
        .unwrap_or(u64::MAX)
        .min(i64::MAX as u64)
}

/// The bound libcairn applies to a call for `call_timeout`, which the
/// wire path applies too: whole ms; zero: none; None: libcairn's default.
fn lib_call_timeout(call_timeout: Option<Duration>) -> Option<Duration> {
    call_timeout.map(|d| Duration::from_millis(millis_up(d)))
}

fn name_of(method: &CStr) -> &str {
    method.to_str().unwrap_or("?")
}

/// The params of the methods that name one session.
fn session(session_id: &str) -> SessionParams<'_> {
    SessionParams {
        session_id: session_id.into(),
    }
}

/// `path` as the wire takes it: absolute (a relative path is resolved
/// against this process's working directory, which need not be the
/// daemon's) and UTF-8.
fn wire_path(path: &Path) -> Result<String> {
    if path.as_os_str().is_empty() {
        return Err(Error::new(ErrorCode::InvalidArgument, "empty path"));
    }
    let abs = std::path::absolute(path).map_err(|e| {
        Error::new(
            ErrorCode::InvalidArgument,
            format!("resolving {}: {e}", path.display()),
        )
    })?;
    abs.into_os_string().into_string().map_err(|p| {
        Error::new(
            ErrorCode::InvalidArgument,
            format!("path is not UTF-8: {}", Path::new(&p).display()),
        )
    })
}

/// Names the cairnd that cairn-sys built beside a static libcairn
/// ([`cairn_sys::DAEMON`]) as the daemon to start when the caller named
/// none and `$CAIRN_DAEMON` is unset. A static libcairn is part of the
/// executable, so libcairn's own search ("next to the loaded libcairn")
/// would look next to the executable, where cargo puts no cairnd.
fn with_built_daemon(mut options: Options) -> Options {
    if options.embedded || options.daemon.is_some() {
        return options;
    }
    if std::env::var_os("CAIRN_DAEMON").is_some_and(|v| !v.is_empty()) {
        return options;
    }
    if let Some(p) = cairn_sys::DAEMON.map(Path::new).filter(|p| p.is_file()) {
        options.daemon = Some(p.to_path_buf());
    }
    options
}

impl Client {
    /// Opens a client (see [`Options`]).
    pub fn connect(options: Options) -> Result<Client> {
        let options = with_built_daemon(options);
        // The workspace the wire path dials: the one named (absolute, as
        // libcairn resolves it), else the one libcairn found (asked for
        // with status when first needed).
        let wire = (!options.embedded && wire::enabled()).then(|| {
            let ws = &options.workspace;
            Wire::new(
                if ws.as_os_str().is_empty() {
                    None
                } else {
                    std::path::absolute(ws).ok()
                },
                lib_call_timeout(options.call_timeout),
            )
        });
        let json = serde_json::to_vec(&options).map_err(|e| Error::encode("options", e))?;
        let json = CString::new(json)
            .map_err(|_| Error::new(ErrorCode::InvalidArgument, "options contain a NUL byte"))?;
        let mut handle = 0u64;
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: json is NUL-terminated; the out-pointers are valid.
        let rc = unsafe { ffi::cairn_open(json.as_ptr(), &mut handle, &mut err) };
        let err = ffi::ErrText(err);
        if rc != ffi::CAIRN_OK {
            return Err(Error::from_call(rc, err.bytes()));
        }
        Ok(Client {
            handle,
            closed: AtomicBool::new(false),
            wire,
        })
    }

    /// The library handle (an opaque integer).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Runs one method; the response buffer is freed when the Buf drops.
    #[inline]
    fn call_buf(&self, method: &CStr, request: &[u8]) -> Result<ffi::Buf> {
        let mut resp: *mut u8 = ptr::null_mut();
        let mut len = 0usize;
        let mut err: *mut c_char = ptr::null_mut();
        let req = if request.is_empty() {
            ptr::null()
        } else {
            request.as_ptr()
        };
        // SAFETY: method is NUL-terminated; request is valid for its length
        // during the call; the out-pointers are valid.
        let rc = unsafe {
            ffi::cairn_call(
                self.handle,
                method.as_ptr(),
                req,
                request.len(),
                &mut resp,
                &mut len,
                &mut err,
            )
        };
        let buf = ffi::Buf { ptr: resp, len };
        let err = ffi::ErrText(err);
        if rc != ffi::CAIRN_OK {
            return Err(Error::from_call(rc, err.bytes()));
        }
        Ok(buf)
    }

    fn call_with<P: Serialize + ?Sized>(&self, method: &CStr, params: &P) -> Result<ffi::Buf> {
        let req = serde_json::to_vec(params).map_err(|e| Error::encode(name_of(method), e))?;
        self.call_buf(method, &req)
    }

    fn invoke<P: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: &CStr,
        params: &P,
    ) -> Result<R> {
        let req = serde_json::to_vec(params).map_err(|e| Error::encode(name_of(method), e))?;
        self.invoke_raw(method, &req)
    }

    /// Runs `method` with JSON params already encoded (empty: none) and
    /// decodes its result.
    fn invoke_raw<R: DeserializeOwned>(&self, method: &CStr, request: &[u8]) -> Result<R> {
        let buf = self.call_buf(method, request)?;
        serde_json::from_slice(buf.as_slice()).map_err(|e| Error::decode(name_of(method), e))
    }

    /// Runs `method` with raw JSON params (empty: none) and returns the raw
    /// JSON result. For methods this crate does not wrap.
    pub fn call(&self, method: &str, params: &[u8]) -> Result<Vec<u8>> {
        let m = CString::new(method).map_err(|_| {
            Error::new(
                ErrorCode::InvalidArgument,
                "method name contains a NUL byte",
            )
        })?;
        Ok(self.call_buf(&m, params)?.as_slice().to_vec())
    }

    /// Runs `method` with `params` encoded as JSON and decodes its result.
    pub fn call_json<P: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R> {
        let m = CString::new(method).map_err(|_| {
            Error::new(
                ErrorCode::InvalidArgument,
                "method name contains a NUL byte",
            )
        })?;
        self.invoke(&m, params)
    }

    /// Reports the mode, library version, workspace and pid (and, in daemon
    /// mode, the daemon's status). A no-op round trip.
    pub fn status(&self) -> Result<LibStatus> {
        self.invoke_raw(c"status", &[])
    }

    /// Commits a snapshot or a delta (`&Snapshot` or `&Change`) to
    /// `session_id` and returns the new generation. With
    /// `expect_generation`, fails with `conflict` (changing nothing) unless
    /// the session is at that generation (0: it must not exist yet).
    pub fn save<'a>(
        &self,
        session_id: &str,
        what: impl Into<Save<'a>>,
        expect_generation: Option<u64>,
    ) -> Result<u64> {
        let (snapshot, change) = match what.into() {
            Save::Snapshot(s) => (Some(s), None),
            Save::Change(c) => (None, Some(c)),
        };
        let r: SaveResult = self.invoke(
            c"save",
            &SaveRequest {
                session_id: session_id.into(),
                snapshot: snapshot.map(Cow::Borrowed),
                change: change.map(Cow::Borrowed),
                expect_generation,
            },
        )?;
        Ok(r.generation)
    }

    /// Returns the session's latest snapshot, drift and interrupted runs:
    /// the whole session, every artifact's bytes included. See
    /// [`Client::resume_session_with`] for less, and the targeted reads
    /// ([`Client::messages`], [`Client::artifact`], [`Client::summary`],
    /// ...) for one part.
    pub fn resume_session(&self, session_id: &str) -> Result<ResumeSessionResult> {
        self.invoke(c"resumeSession", &session(session_id))
    }

    /// [`Client::resume_session`] with only what `options` asks for: a tail
    /// of the messages, artifacts without data or none, no traces, no
    /// drift, no process checks.
    pub fn resume_session_with(
        &self,
        session_id: &str,
        options: &ResumeOptions,
    ) -> Result<ResumeSessionResult> {
        self.invoke(
            c"resumeSession",
            &ResumeSessionRequest::new(session_id, options),
        )
    }

    /// The session's generation, counts, sizes and timestamps, without its
    /// content.
    pub fn summary(&self, session_id: &str) -> Result<Summary> {
        self.invoke(c"summary", &session(session_id))
    }

    /// A page of the session's messages (see [`MessagesQuery`]; the default
    /// query reads them all). Query again from the page's `next` while
    /// `more` is true.
    pub fn messages(&self, session_id: &str, query: &MessagesQuery) -> Result<MessagesResult> {
        self.invoke(c"messages", &MessagesRequest::new(session_id, query))
    }

    /// One artifact with its bytes ([`Artifact::bytes`]); `not_found` when
    /// the session does not hold it.
    pub fn artifact(&self, session_id: &str, artifact_id: &str) -> Result<ArtifactResult> {
        self.invoke(
            c"artifact",
            &ArtifactRequest {
                session_id: session_id.into(),
                artifact_id: artifact_id.into(),
            },
        )
    }

    /// The session's artifacts without their bytes (`data` is `None`).
    pub fn artifacts(&self, session_id: &str) -> Result<ArtifactsResult> {
        self.invoke(c"artifacts", &session(session_id))
    }

    /// The named artifacts the session holds, with their bytes, in the
    /// order named, all from one generation; ids it does not hold are
    /// skipped. At most 1,024 distinct ids; see [`ArtifactsByIDResult::next`]
    /// for an answer cut short by the reply size limit.
    pub fn artifacts_by_id(
        &self,
        session_id: &str,
        artifact_ids: &[&str],
    ) -> Result<ArtifactsByIDResult> {
        self.invoke(
            c"artifactsByID",
            &ArtifactsByIDRequest {
                session_id: session_id.into(),
                artifact_ids: artifact_ids.iter().map(|&id| id.into()).collect(),
            },
        )
    }

    /// One run with its latest loop checkpoint, if it has one. With
    /// `session_id`, fails with `not_owner` unless that session records
    /// the run.
    pub fn run(&self, run_id: &str, session_id: Option<&str>) -> Result<RunResult> {
        self.invoke(
            c"run",
            &RunRequest {
                run_id: run_id.into(),
                session_id: session_id.map(Into::into),
            },
        )
    }

    /// The session's runs.
    pub fn runs(&self, session_id: &str) -> Result<RunsResult> {
        self.invoke(c"runs", &session(session_id))
    }

    /// A page of a run's events: the traces recorded with its id and its
    /// kept loop checkpoints, in commit order (see [`RunEventsQuery`]).
    /// Query again from the page's `next` while `more` is true.
    pub fn run_events(&self, run_id: &str, query: &RunEventsQuery) -> Result<RunEventsResult> {
        self.invoke(c"runEvents", &RunEventsRequest::new(run_id, query))
    }

    /// Starts a run in a session (`run_id`: None lets cairn choose one).
    pub fn begin_run(&self, session_id: &str, run_id: Option<&str>) -> Result<BeginRunResult> {
        self.invoke(
            c"beginRun",
            &BeginRunRequest {
                session_id: session_id.into(),
                run_id: run_id.map(Into::into),
            },
        )
    }

    /// Records the boundary after a completed tool turn, atomically with the
    /// turn's messages.
    ///
    /// In daemon mode the client sends it on its own connection to cairnd
    /// when it can send it exactly as libcairn would, else through
    /// libcairn (see the crate's README); the result and the errors are
    /// the same either way.
    pub fn checkpoint(&self, request: &CheckpointRequest<'_>) -> Result<CheckpointResult> {
        if let Some(w) = &self.wire {
            if !self.closed.load(Ordering::Acquire) {
                let ws = || self.status().ok().map(|s| PathBuf::from(s.workspace));
                if let Some(r) = w.checkpoint(request, &ws)? {
                    return Ok(r);
                }
                w.handed();
            }
        }
        self.invoke(c"checkpoint", request)
    }

    /// How many checkpoints this client sent on its own connection (None:
    /// the path is off: embedded mode, or `CAIRN_RUST_WIRE=0`). For tests
    /// and benchmarks.
    #[doc(hidden)]
    pub fn wire_sent(&self) -> Option<u64> {
        self.wire.as_ref().map(Wire::sent)
    }

    /// How many checkpoints this client's own connection handed to
    /// libcairn (None: the path is off). For tests.
    #[doc(hidden)]
    pub fn wire_handed(&self) -> Option<u64> {
        self.wire.as_ref().map(Wire::handed_count)
    }

    /// Holds the wire path's connection as another thread's call in
    /// progress does, until the guard drops (None: the path is off or
    /// busy). For tests.
    #[doc(hidden)]
    pub fn wire_hold(&self) -> Option<impl Sized + '_> {
        self.wire.as_ref().and_then(Wire::hold)
    }

    /// Ends a run (deleting its loop checkpoint) and returns the generation.
    pub fn complete_run(&self, request: &CompleteRunRequest<'_>) -> Result<u64> {
        let r: CompleteRunResult = self.invoke(c"completeRun", request)?;
        Ok(r.generation)
    }

    /// Resumes a run from its latest loop checkpoint as a new run. Fails
    /// with `no_checkpoint` when there is none, and `not_owner` when
    /// `session_id` is given and does not own the run.
    pub fn resume_run(
        &self,
        run_id: &str,
        session_id: Option<&str>,
        new_run_id: Option<&str>,
    ) -> Result<ResumeRunResult> {
        self.invoke(
            c"resumeRun",
            &ResumeRunRequest {
                run_id: run_id.into(),
                session_id: session_id.map(Into::into),
                new_run_id: new_run_id.map(Into::into),
                takeover: false,
            },
        )
    }

    /// Opens (or reopens) a resumable workflow and returns its completed
    /// steps. Fails with `step_identity_changed` when a recorded step's
    /// identity differs from `steps`.
    pub fn begin_workflow(
        &self,
        workflow_id: &str,
        steps: &[StepSpec],
        session_id: Option<&str>,
    ) -> Result<Vec<StepRecord>> {
        let r: BeginWorkflowResult = self.invoke(
            c"beginWorkflow",
            &BeginWorkflowRequest {
                workflow_id: workflow_id.into(),
                session_id: session_id.map(Into::into),
                steps: steps.into(),
                takeover: false,
            },
        )?;
        Ok(r.completed)
    }

    /// Records one successful workflow step and its result.
    pub fn complete_step(
        &self,
        workflow_id: &str,
        step_id: &str,
        identity: &str,
        result: Option<&Value>,
        session_id: Option<&str>,
    ) -> Result<()> {
        self.call_with(
            c"completeStep",
            &CompleteStepRequest {
                workflow_id: workflow_id.into(),
                session_id: session_id.map(Into::into),
                step_id: step_id.into(),
                identity: identity.into(),
                result: result.map(Cow::Borrowed),
            },
        )?;
        Ok(())
    }

    /// Deletes a workflow's checkpoint.
    pub fn finish_workflow(&self, workflow_id: &str) -> Result<()> {
        self.call_with(
            c"finishWorkflow",
            &WorkflowParams {
                workflow_id: workflow_id.into(),
            },
        )?;
        Ok(())
    }

    /// Lists the workspace's sessions.
    pub fn list_sessions(&self) -> Result<Vec<Summary>> {
        let r: ListResult = self.invoke(c"list", &Empty {})?;
        Ok(r.sessions)
    }

    /// Deletes a session and every checkpoint that belongs to it.
    pub fn delete(&self, session_id: &str) -> Result<()> {
        self.call_with(c"delete", &session(session_id))?;
        Ok(())
    }

    /// Copies a session (at a generation; None: the latest) to `new_id`.
    pub fn fork(
        &self,
        session_id: &str,
        new_id: &str,
        at_generation: Option<u64>,
    ) -> Result<ForkResult> {
        self.invoke(
            c"fork",
            &ForkRequest {
                session_id: session_id.into(),
                new_id: new_id.into(),
                at_generation,
            },
        )
    }

    /// Exports a session as its single-file JSON envelope.
    pub fn export(&self, session_id: &str) -> Result<Value> {
        let r: ExportResult = self.invoke(c"export", &session(session_id))?;
        Ok(r.envelope)
    }

    /// Imports a session from a JSON envelope (or a bare session).
    pub fn import(&self, envelope: &Value) -> Result<ImportResult> {
        self.invoke(
            c"import",
            &ImportParams {
                envelope: Cow::Borrowed(envelope),
            },
        )
    }

    /// Exports a session into the file at `path`: the envelope
    /// [`Client::export`] answers, written page by page as the session is
    /// read (the writer's memory stays bounded whatever the session's size)
    /// to a temp file beside `path`, synced and renamed into place. In
    /// daemon mode the daemon writes it, with its permissions; a relative
    /// `path` is resolved against this process's working directory. Fails
    /// with `not_found` (no such session), `invalid_argument` (a path that
    /// is not UTF-8, or not a regular file) and `conflict` (the session
    /// changed while it was read: retry).
    pub fn export_file(
        &self,
        session_id: &str,
        path: impl AsRef<Path>,
    ) -> Result<ExportFileResult> {
        let path = wire_path(path.as_ref())?;
        self.invoke(
            c"exportFile",
            &ExportFileRequest {
                session_id: session_id.into(),
                path: path.into(),
            },
        )
    }

    /// Imports the envelope (or bare session) in the file at `path`, as
    /// [`Client::import`] takes it; a relative `path` is resolved against
    /// this process's working directory. The file is read whole (an import
    /// is one commit). Fails as `import` does, plus `not_found` (no such
    /// file).
    pub fn import_file(&self, path: impl AsRef<Path>) -> Result<ImportResult> {
        let path = wire_path(path.as_ref())?;
        self.invoke(c"importFile", &ImportFileRequest { path: path.into() })
    }

    /// The daemon's (daemon mode) or the engine's (embedded mode) identity,
    /// protocol version, capabilities, methods, events and limits.
    pub fn hello(&self) -> Result<HelloResult> {
        self.invoke_raw(c"hello", &[])
    }

    /// What changed in the workspace tree after the clock `since` (`None`:
    /// every file, as a fresh instance). Pass the answer's `clock` as
    /// `since` next time. Fails with `unavailable` when the workspace is
    /// not tracked, and `invalid_argument` for a malformed clock.
    pub fn changes(&self, since: Option<&str>) -> Result<ChangeSet> {
        self.invoke(
            c"changes",
            &ChangesParams {
                since: since.map(Into::into),
            },
        )
    }

    /// Reads and checks every record of every log the store keeps (and the
    /// workspace manifests): what it checked, each damaged or unreadable
    /// file (`problems`; `ok` when none) and what quarantine holds.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.invoke(c"verify", &Empty {})
    }

    /// [`verify`](Self::verify) with params: `VerifyRequest { secrets:
    /// true }` also scans every session's content for credential-shaped
    /// strings and lists where each is (`secrets`), redacted; nothing is
    /// changed.
    pub fn verify_with(&self, req: &VerifyRequest) -> Result<VerifyReport> {
        self.invoke(c"verify", req)
    }

    /// Salvages the damaged log of one session or workflow
    /// ([`RepairRequest::session`], [`RepairRequest::workflow`]): keeps
    /// what can be proven intact and says what it cannot keep (`lost`).
    /// It writes nothing unless the request is applied
    /// ([`RepairRequest::apply`]); then the original bytes are kept in the
    /// file `quarantine` names.
    pub fn repair(&self, req: &RepairRequest<'_>) -> Result<RepairReport> {
        self.invoke(c"repair", req)
    }

    /// Renders HANDOFF.md from the session's latest generation and lists
    /// what the handoff lacks. It prints only what the session proves.
    pub fn handoff(&self, session_id: &str) -> Result<HandoffResult> {
        self.invoke(c"handoff", &session(session_id))
    }

    /// Runs the health check of every process the session's latest
    /// generation records, now (each bounded by `timeout`; `None`: the
    /// default), and reports each preview with its process's state. It
    /// starts nothing.
    pub fn runtime_check(
        &self,
        session_id: &str,
        timeout: Option<Duration>,
    ) -> Result<RuntimeCheckResult> {
        self.invoke(
            c"runtime.check",
            &RuntimeCheckRequest {
                session_id: session_id.into(),
                timeout_ms: timeout.map(millis),
            },
        )
    }

    /// Brings the recorded process `name` back: never starts one whose
    /// health check passes, starts the recorded command detached in its
    /// cwd, and waits up to `timeout` (`None`: the default) for its health
    /// check to pass, killing what it started if it does not. In daemon
    /// mode the daemon starts it, with the daemon's environment; in
    /// embedded mode this process does. A process that does not come up is
    /// `outcome` "failed" in the result, not an error; an unknown session
    /// or process is `not_found`.
    pub fn runtime_restart(
        &self,
        session_id: &str,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<RestartResult> {
        self.invoke(
            c"runtime.restart",
            &RuntimeRestartRequest {
                session_id: session_id.into(),
                name: name.into(),
                timeout_ms: timeout.map(millis),
            },
        )
    }

    /// Subscribes to events (`events`: names from [`crate::events`]; empty:
    /// all). The subscription is an iterator of events in commit order;
    /// dropping it unsubscribes.
    pub fn subscribe(&self, events: &[&str]) -> Result<Subscription<'_>> {
        let r: LibSubscription = self.invoke(
            c"subscribe",
            &SubscribeParams {
                events: events.iter().map(|&e| e.into()).collect(),
            },
        )?;
        Ok(Subscription {
            client: self,
            id: r.subscription,
            dropped: 0,
            closed: false,
            unsubscribed: false,
        })
    }

    /// Closes the handle: embedded mode closes the store and releases its
    /// lock; daemon mode closes the connection (the daemon keeps running).
    /// Later calls fail with `bad_handle`; closing again does nothing.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(w) = &self.wire {
            w.close();
        }
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: the out-pointer is valid.
        let rc = unsafe { ffi::cairn_close(self.handle, &mut err) };
        let err = ffi::ErrText(err);
        if rc != ffi::CAIRN_OK {
            return Err(Error::from_call(rc, err.bytes()));
        }
        Ok(())
    }

    /// Runs a resumable workflow's steps concurrently.
    ///
    /// Opens the workflow with the specs' ids and identities
    /// (`step_identity_changed` fails before anything runs), runs every step
    /// not completed yet on a pool of scoped threads, records each success
    /// with `complete_step` as it lands, and returns all results in spec
    /// order (recorded ones, for steps completed earlier, decoded from their
    /// JSON). If a step fails, the others still run to the end and their
    /// successes stay recorded, so a rerun does not run them again; then the
    /// first failure to land is returned. A panicking step is resumed as a
    /// panic once the others are done. The workflow is not finished: call
    /// `finish_workflow` when you are done with it.
    pub fn parallel_resumable<'s, T, E>(
        &self,
        specs: Vec<Step<'s, T, E>>,
        workflow_id: &str,
    ) -> Result<Vec<T>, WorkflowError<E>>
    where
        T: Serialize + DeserializeOwned + Send,
        E: Send,
    {
        self.parallel_resumable_in(specs, workflow_id, None)
    }

    /// [`Client::parallel_resumable`] for a workflow owned by `session_id`
    /// (deleting the session deletes the workflow).
    pub fn parallel_resumable_in<'s, T, E>(
        &self,
        specs: Vec<Step<'s, T, E>>,
        workflow_id: &str,
        session_id: Option<&str>,
    ) -> Result<Vec<T>, WorkflowError<E>>
    where
        T: Serialize + DeserializeOwned + Send,
        E: Send,
    {
        crate::workflow::run(self, specs, workflow_id, session_id)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

pub use crate::workflow::{Step, WorkflowError};

/// An event subscription: an iterator of events in commit order. Iteration
/// blocks until the next event, and ends when the subscription or its client
/// is closed. Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription<'c> {
    client: &'c Client,
    id: u64,
    dropped: u64,
    closed: bool,
    unsubscribed: bool,
}

/// How long one blocking `nextEvent` call waits before it is repeated.
const EVENT_POLL: Duration = Duration::from_secs(30);

impl Subscription<'_> {
    /// The subscription's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How many events were dropped because the queue was full (as of the
    /// last call).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Whether the subscription was found closed.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Waits up to `timeout` for the next event: `Ok(None)` when none came
    /// in time or the subscription is closed (see [`Subscription::is_closed`]).
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Event>> {
        if self.closed {
            return Ok(None);
        }
        let ms = timeout.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
        let r: NextEventResult = self.client.invoke(
            c"nextEvent",
            &NextEventParams {
                subscription: self.id,
                timeout_ms: Some(ms),
            },
        )?;
        self.dropped = r.dropped;
        if r.closed {
            self.closed = true;
        }
        Ok(r.event)
    }

    /// Unsubscribes now, reporting any error (drop ignores it).
    pub fn close(mut self) -> Result<()> {
        self.unsubscribe()
    }

    fn unsubscribe(&mut self) -> Result<()> {
        if self.unsubscribed {
            return Ok(());
        }
        self.unsubscribed = true;
        self.closed = true;
        self.client.call_with(
            c"unsubscribe",
            &NextEventParams {
                subscription: self.id,
                timeout_ms: None,
            },
        )?;
        Ok(())
    }
}

impl Iterator for Subscription<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if self.closed {
                return None;
            }
            match self.next_timeout(EVENT_POLL) {
                Ok(Some(ev)) => return Some(Ok(ev)),
                Ok(None) => continue,
                Err(e) => {
                    self.closed = true;
                    if e.code == ErrorCode::BadHandle && self.client.closed.load(Ordering::Acquire)
                    {
                        return None; // the client was closed under us
                    }
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        if !self.client.closed.load(Ordering::Acquire) {
            let _ = self.unsubscribe();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_timeout_option() {
        assert_eq!(millis_up(Duration::ZERO), 0);
        assert_eq!(millis_up(Duration::from_nanos(1)), 1);
        assert_eq!(millis_up(Duration::from_micros(400_001)), 401);
        assert_eq!(millis_up(Duration::from_millis(400)), 400);
        assert_eq!(millis_up(Duration::MAX), i64::MAX as u64);
        let json = |o: &Options| serde_json::to_value(o).unwrap();
        assert!(json(&Options::new("w")).get("call_timeout_ms").is_none());
        let o = Options::new("w").call_timeout(Duration::from_millis(1500));
        assert_eq!(o.call_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(json(&o)["call_timeout_ms"], 1500);
        let o = Options::new("w").call_timeout(Duration::ZERO);
        assert_eq!(json(&o)["call_timeout_ms"], 0);
        // The wire path gets what libcairn applies: zero (no bound) kept,
        // not taken for None (libcairn's default).
        assert_eq!(lib_call_timeout(None), None);
        assert_eq!(lib_call_timeout(Some(Duration::ZERO)), Some(Duration::ZERO));
        assert_eq!(
            lib_call_timeout(Some(Duration::from_micros(400_001))),
            Some(Duration::from_millis(401))
        );
    }
}
