/*
 * cairn.h — the C ABI of libcairn, cairn's shared library.
 *
 * libcairn gives a host process (Python, Node.js, Rust, C, ...) the cairn
 * operations: save, resumeSession, runs with checkpoints and resumeRun,
 * resumable workflows, list, delete, fork, export, import and events. A
 * handle talks either to the workspace's daemon (cairnd, started on demand)
 * or, in embedded mode, to the engine running inside this process.
 *
 * Conventions
 *   - Every function returns 0 (CAIRN_OK) on success and a negative
 *     CAIRN_E_* code on failure.
 *   - On failure, *err receives a NUL-terminated JSON object
 *     {"code": "<stable code>", "message": "<text>"} that the caller frees
 *     with cairn_free. err may be NULL when the caller does not want it.
 *     There is no shared "last error": every call reports its own.
 *   - Every buffer the library returns (responses, error texts) is freed
 *     with cairn_free, never with another allocator's free.
 *   - Requests and responses are JSON (UTF-8). Binary artifact bytes travel
 *     base64-encoded. The methods and their params and results are those of
 *     protocol/PROTOCOL.md, with the same names; see also "Methods" below.
 *   - Handles and tickets are opaque integers, looked up in tables under a
 *     lock: an unknown, closed or already used one is an error
 *     (CAIRN_E_BAD_HANDLE, CAIRN_E_BAD_TICKET), never undefined behaviour.
 *     Every function is safe to call from many
 *     threads at once, on one handle or several.
 *
 * The fork rule
 *   The Go runtime inside libcairn does not survive fork() without exec():
 *   only the forking thread exists in the child, so the runtime's other
 *   threads are gone and a call could hang. libcairn detects use in a forked
 *   child (pthread_atfork, and the pid recorded when it was loaded) and fails
 *   every call there with CAIRN_E_FORKED instead of hanging. Open handles in
 *   the child you exec'd, or before forking workers use them, never after.
 */
#ifndef CAIRN_H
#define CAIRN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: cairn_submit lost its spin_us, response and response_len parameters
 * (its outcome always comes through cairn_take); CAIRN_PENDING is gone;
 * CAIRN_E_BAD_TICKET is new. */
#define CAIRN_ABI_VERSION 2

/* Return codes. The JSON error's "code" names the same condition. */
#define CAIRN_OK                       0
#define CAIRN_E_INTERNAL              -1   /* "internal": I/O failure, broken invariant */
#define CAIRN_E_INVALID_ARGUMENT      -2   /* "invalid_argument" (also bad JSON, unknown params field) */
#define CAIRN_E_NOT_FOUND             -3   /* "not_found" */
#define CAIRN_E_CONFLICT              -4   /* "conflict": expect_generation mismatch, id taken */
#define CAIRN_E_SCHEMA_UNSUPPORTED    -5   /* "schema_unsupported": a newer schema_version */
#define CAIRN_E_TOO_LARGE             -6   /* "too_large" */
#define CAIRN_E_NO_CHECKPOINT         -7   /* "no_checkpoint": resumeRun of a run with none */
#define CAIRN_E_NOT_OWNER             -8   /* "not_owner": the run belongs to another session */
#define CAIRN_E_STEP_IDENTITY_CHANGED -9   /* "step_identity_changed" */
#define CAIRN_E_LOCKED               -10   /* "locked": another process holds the workspace store */
#define CAIRN_E_UNAVAILABLE          -11   /* "unavailable": no daemon, connection lost, shutting down */
#define CAIRN_E_FORKED               -12   /* "forked": called in a forked child (see the fork rule) */
#define CAIRN_E_BAD_HANDLE           -13   /* "bad_handle": unknown or closed handle */
#define CAIRN_E_METHOD_NOT_FOUND     -14   /* "method_not_found" */
#define CAIRN_E_BAD_REQUEST          -15   /* "bad_request": the daemon rejected the message */
#define CAIRN_E_BAD_TICKET           -16   /* "bad_ticket": cairn_take of an unknown, unfinished or already taken ticket */
#define CAIRN_E_CORRUPT              -17   /* "corrupt": a log or file of the store is damaged (cairn verify, cairn repair) */
#define CAIRN_E_NO_SPACE             -18   /* "no_space": file system full, quota or file size limit reached; retry after freeing space */

/* cairn_version returns the library version, e.g. "0.1.0". The string is
 * static: do not free it. Never fails. */
const char *cairn_version(void);

/* cairn_open opens a handle. options_json (NULL or "" for defaults) is a
 * JSON object:
 *   "workspace":   directory of the workspace (default: the nearest
 *                  folder at or above the current directory holding
 *                  .cairn/, else the nearest one holding .git, else the
 *                  current directory)
 *   "embedded":    false (default): talk to the workspace's cairnd,
 *                  starting it when none runs; true: run the engine in this
 *                  process over <workspace>/.cairn. Embedded mode takes the
 *                  workspace's store lock, so no daemon can serve that
 *                  workspace meanwhile (CAIRN_E_LOCKED names the holder).
 *                  An embedded open of a workspace a live cairnd serves
 *                  fails with CAIRN_E_LOCKED naming the daemon's pid and
 *                  how to stop it (`cairn daemon stop`); it does not work
 *                  through the daemon.
 *                  In daemon mode, a workspace another process holds
 *                  embedded fails at once with CAIRN_E_LOCKED naming its
 *                  pid (no daemon is started); a daemon that goes away
 *                  during the handshake is dialed again, and one started,
 *                  before CAIRN_E_UNAVAILABLE. A daemon that takes the
 *                  connection and does not answer it (stopped, stuck on
 *                  its disk) fails the open after 15 s with
 *                  CAIRN_E_UNAVAILABLE naming its pid and its state.
 *   "daemon":      path of the cairnd executable to start (default: the
 *                  CAIRN_DAEMON variable, then cairnd in the directory of
 *                  the loaded libcairn (found with dladdr), then next to
 *                  the running executable, then on PATH)
 *   "auto_start":  false to fail with CAIRN_E_UNAVAILABLE instead of
 *                  starting a daemon (default true)
 *   "daemon_args": extra arguments for a daemon this call starts, such as
 *                  ["--idle-timeout=30s"]; they follow the default
 *                  "--idle-timeout=10m" (a started daemon exits after ten
 *                  minutes without connections), which they can override
 *                  ("--idle-timeout=0": run until stopped)
 *   "max_session_bytes": embedded mode: the most live bytes a session may
 *                  hold; a save past it fails with CAIRN_E_TOO_LARGE, edits
 *                  that shrink a session are always taken (default 4 GiB;
 *                  a daemon takes --max-session-bytes instead)
 *   "store":       a postgres:// URL: the sessions live in that PostgreSQL
 *                  database, shared with every daemon and handle using it,
 *                  on any host (default: the workspace's .cairn folder).
 *                  Embedded mode opens the database itself (the workspace
 *                  lock, index and manifests stay local); daemon mode
 *                  passes it as --store to a daemon this call starts (a
 *                  daemon already running keeps its own store). Also taken
 *                  by a started daemon from CAIRN_STORE.
 *   "call_timeout_ms": daemon mode: how long a call waits for the daemon,
 *                  its request's write included, before it fails with
 *                  CAIRN_E_UNAVAILABLE ("no answer to <method> from cairnd
 *                  within ..."). The outcome of such a call is unknown: a
 *                  request that reached the daemon may still be carried
 *                  out (a save's expect_generation tells). A write it cuts
 *                  short closes the connection; the next call reconnects.
 *                  0 to 86400000; 0: wait as long as the daemon takes;
 *                  default 300000 (5 minutes: long enough that only a
 *                  daemon that is stopped or stuck reaches it, so a slow
 *                  commit is never failed early). It never bounds the
 *                  methods whose work grows with the store or that have a
 *                  timeout of their own: verify, repair, export,
 *                  exportFile, import, importFile, fork, runtime.check and
 *                  runtime.restart wait as long as the daemon takes.
 *                  Embedded mode ignores it.
 * Unknown option names are rejected (CAIRN_E_INVALID_ARGUMENT).
 * Returns CAIRN_OK and sets *handle; or CAIRN_E_INVALID_ARGUMENT,
 * CAIRN_E_LOCKED, CAIRN_E_NO_SPACE (embedded mode, a full file system),
 * CAIRN_E_UNAVAILABLE, CAIRN_E_FORKED, CAIRN_E_INTERNAL. */
int cairn_open(const char *options_json, uint64_t *handle, char **err);

/* cairn_call runs one method on the calling thread and waits for it.
 * method is a NUL-terminated method name; request/request_len its JSON
 * params (request may be NULL when request_len is 0: no params). On
 * CAIRN_OK, *response and *response_len hold the JSON result (free it with
 * cairn_free). Returns CAIRN_OK or any CAIRN_E_* code. */
int cairn_call(uint64_t handle, const char *method, const uint8_t *request, size_t request_len,
               uint8_t **response, size_t *response_len, char **err);

/* cairn_call_buf is cairn_call for a caller that keeps a buffer for small
 * results (a save's or a checkpoint's answer is a few dozen bytes): a JSON
 * result of at most buf_cap bytes is written into buf, *response is set to
 * NULL and *response_len to its length, and there is nothing to free. A
 * larger result is answered as cairn_call answers it, in memory the caller
 * frees with cairn_free (*response is then not NULL). buf is not NUL
 * terminated, and its bytes past *response_len are unspecified. buf may be
 * NULL when buf_cap is 0 (every result is then allocated). Each concurrent
 * call needs a buffer of its own; the library writes to it only during the
 * call. Errors as cairn_call (*err allocated). It is newer than cairn_call
 * within ABI version 2: a host that may load an older libcairn looks the
 * symbol up (dlsym) and falls back to cairn_call without it. */
int cairn_call_buf(uint64_t handle, const char *method, const uint8_t *request, size_t request_len, uint8_t *buf,
                   size_t buf_cap, uint8_t **response, size_t *response_len, char **err);

/* cairn_ws_mask masks (or unmasks: the same operation) the n bytes at buf
 * in place with a WebSocket masking key (RFC 6455 section 5.3): byte i is
 * XORed with key[i % 4]. It is for a binding that speaks the wire protocol
 * itself (the Python binding's daemon-mode checkpoint), where masking a
 * frame in the host language costs more than the rest of the frame. Plain
 * C: it never enters the Go runtime, needs no handle, and may be called
 * from any thread, in a forked child too. Newer than cairn_call within ABI
 * version 2: look it up (dlsym) and mask another way without it. */
void cairn_ws_mask(uint8_t *buf, size_t n, const uint8_t key[4]);

/* cairn_submit queues one method call for a thread the library owns and
 * returns at once, so the calling thread never enters the Go runtime and
 * never waits. It is for event loops (Node.js through koffi, where entering
 * Go from the main thread costs about 100 us a call). The request bytes are
 * copied; the caller may free them at once.
 *   CAIRN_OK   queued: *ticket (never 0) identifies the call. When the call
 *              finishes, its ticket (8 bytes, native byte order) is written
 *              to the pipe of cairn_completion_fd; then cairn_take returns
 *              its outcome. Every outcome, success or error, comes that way
 *              (a call on a closed handle, too).
 *   CAIRN_E_*  the call could not be queued (CAIRN_E_INVALID_ARGUMENT,
 *              CAIRN_E_FORKED, CAIRN_E_INTERNAL); *ticket is 0.
 * A ticket that is never taken keeps its call's result in memory. */
int cairn_submit(uint64_t handle, const char *method, const uint8_t *request, size_t request_len, uint64_t *ticket,
                 char **err);

/* cairn_completion_fd returns (in *fd) the read end of the pipe on which
 * the tickets of finished cairn_submit calls are written. It is the same fd
 * for the life of the process, shared by every handle; do not close it, and
 * read it from one place only (each ticket is written once). No library
 * thread ever blocks on it: tickets that find the pipe full wait in memory
 * and are written as the host takes tickets. Returns CAIRN_OK,
 * CAIRN_E_FORKED or CAIRN_E_INTERNAL. */
int cairn_completion_fd(int *fd, char **err);

/* cairn_take returns the outcome of a finished call (its ticket was read
 * from the completion pipe) exactly as cairn_call would, and releases the
 * ticket. The ticket is looked up in the library's ticket table, so any
 * value is safe to pass: one that was never issued, was already taken, or
 * whose call has not finished gets CAIRN_E_BAD_TICKET ("bad_ticket").
 * Plain C: it never enters the Go runtime. */
int cairn_take(uint64_t ticket, uint8_t **response, size_t *response_len, char **err);

/* cairn_free frees a buffer returned by this library. NULL is a no-op. */
void cairn_free(void *p);

/* cairn_close closes a handle: embedded mode closes the store and releases
 * its lock; daemon mode closes the connection (the daemon keeps running).
 * Pending calls on the handle finish with an error; waiting nextEvent calls
 * return {"closed": true}. Returns CAIRN_OK, CAIRN_E_BAD_HANDLE,
 * CAIRN_E_FORKED or CAIRN_E_INTERNAL. */
int cairn_close(uint64_t handle, char **err);

/* cairn_open_handles returns how many handles are open (for leak tests). */
int cairn_open_handles(void);

/*
 * Methods (cairn_call, cairn_call_buf and cairn_submit), params -> result, all JSON:
 *   status          {} -> {mode, version, workspace, pid, daemon?}
 *   hello           {} -> the daemon's hello (daemon mode), or the engine's
 *   save            {session_id, snapshot | change, expect_generation?} -> {generation}
 *   resumeSession   {session_id} -> {snapshot, generation, drift, interrupted_runs}
 *   beginRun        {session_id, run_id?} -> {run_id, generation}
 *   checkpoint      {run_id, turn, new_messages, usage, tool_calls_count, state?} -> {generation, message_count}
 *   completeRun     {run_id, status, usage?, tool_calls_count?} -> {generation}
 *   resumeRun       {run_id, session_id?, new_run_id?} -> {run_id, resumed_from, session_id, messages, turn, usage, tool_calls_count, state, files_touched_after_checkpoint, files_tracked}
 *   beginWorkflow   {workflow_id, session_id?, steps:[{step_id, identity}]} -> {completed:[...]}
 *   completeStep    {workflow_id, session_id?, step_id, identity, result?} -> {}
 *   finishWorkflow  {workflow_id} -> {}
 *   list            {} -> {sessions:[summary]}
 *   delete          {session_id} -> {}
 *   fork            {session_id, new_id, at_generation?} -> {session_id, generation}
 *   export          {session_id} -> {envelope: <the JSON envelope>}
 *   import          {envelope: <a JSON envelope or bare session>} -> {session_id, generation}
 *   changes         {since?} -> {clock, fresh_instance, added, modified, deleted}
 *   handoff         {session_id} -> {session_id, generation, markdown, complete, missing:[{key, message}], files}
 *   runtime.check   {session_id, timeout_ms?} -> {processes:[{name, state, detail}], previews:[...]}
 *   runtime.restart {session_id, name, timeout_ms?} -> {name, outcome, state, pid, took_ms, detail, log, missing_env, error}
 *                   (started by the daemon in daemon mode, with its environment;
 *                   by this process in embedded mode)
 *   subscribe       {events?:[...]} -> {subscription}
 *   nextEvent       {subscription, timeout_ms?} -> {event?: {event, data}, closed, dropped}
 *   unsubscribe     {subscription} -> {}
 */

#ifdef __cplusplus
}
#endif
#endif /* CAIRN_H */
