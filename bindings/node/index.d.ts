// Type declarations of the cairn Node.js binding (index.js).
//
// Method names and options are camelCase. The documents that travel through
// cairn (snapshots, changes, results, envelopes) keep their wire names
// (snake_case, as in protocol/PROTOCOL.md and the C API's JSON), because
// they are the stored format shared with every other language. Opaque host
// values (messages, state, step results, metadata values) are any JSON value.

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface ConnectOptions {
  /** Directory of the workspace (default "."). */
  workspace?: string;
  /** Run the engine in this process (takes the workspace's store lock). Default false: daemon mode. */
  embedded?: boolean;
  /** Path of the cairnd executable to start (default: CAIRN_DAEMON, next to libcairn, then PATH). */
  daemon?: string;
  /** false: fail with UnavailableError instead of starting a daemon (default true). */
  autoStart?: boolean;
  /** Extra arguments for a daemon this call starts, e.g. ["--idle-timeout=30s"]. */
  daemonArgs?: string[];
}

export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  total_tokens?: number;
  cost?: number;
}

export interface Artifact {
  id: string;
  kind?: string;
  name?: string;
  media_type?: string;
  run_id?: string;
  sha256?: string;
  size?: number;
  /** Base64 of the bytes. */
  data?: string;
  path?: string;
}

export interface Trace {
  seq: number;
  time: string;
  run_id?: string;
  type: string;
  data?: Json;
}

export interface Run {
  run_id: string;
  status: 'running' | 'completed' | 'interrupted' | 'failed' | string;
  parent_run_id?: string;
  started_at: string;
  ended_at?: string;
  usage: Usage;
  tool_calls_count: number;
}

export interface Snapshot {
  schema_version: number;
  session_id: string;
  generation?: number;
  created_at?: string;
  updated_at?: string;
  workspace?: { root?: string; git_head?: string; git_branch?: string; git_dirty?: boolean };
  agent?: Record<string, Json>;
  metadata?: Record<string, Json>;
  messages: Json[];
  artifacts?: Artifact[];
  traces?: Trace[];
  runs?: Run[];
  verifications?: Array<Record<string, Json>>;
  subagent_tasks?: Array<Record<string, Json>>;
  handoff?: Record<string, Json>;
  runtime?: Record<string, Json>;
  files?: { id?: string; clock?: string; entries?: number };
  [key: string]: unknown;
}

/** A delta commit (see session.Change). */
export interface Change {
  schema_version?: number;
  replace?: Snapshot;
  workspace?: Snapshot['workspace'];
  agent?: Record<string, Json>;
  metadata?: Record<string, Json>;
  append_messages?: Json[];
  append_traces?: Trace[];
  append_artifacts?: Artifact[];
  upsert_runs?: Run[];
  upsert_verifications?: Array<Record<string, Json>>;
  upsert_subagent_tasks?: Array<Record<string, Json>>;
  handoff?: Record<string, Json>;
  runtime?: Record<string, Json>;
  files?: Snapshot['files'];
  [key: string]: unknown;
}

export interface SaveOptions {
  snapshot?: Snapshot;
  change?: Change;
  /** Fail with ConflictError unless the session is at this generation. */
  expectGeneration?: number;
}

export interface Drift {
  tracked: boolean;
  /** Why drift is not tracked, when it is not. */
  reason?: string;
  added: string[] | null;
  modified: string[] | null;
  deleted: string[] | null;
}

/** The live state of one recorded process, from its health check run now. */
export interface ProcessState {
  name: string;
  state: 'not_running' | 'healthy' | 'unhealthy' | 'unknown' | string;
  /** What was tried and what it answered. */
  detail?: string;
}

export interface InterruptedRun {
  run_id: string;
  status: string;
  resumed_as?: string;
  turn: number;
  message_count: number;
  usage: Usage;
  tool_calls_count: number;
  checkpointed_at: string;
}

export interface ResumeSessionResult {
  snapshot: Snapshot;
  generation: number;
  drift: Drift;
  interrupted_runs: InterruptedRun[] | null;
  /** The live state of each recorded runtime process (nothing is restarted). */
  processes: ProcessState[];
}

export interface BeginRunResult {
  run_id: string;
  generation: number;
}

export interface CheckpointOptions {
  turn: number;
  newMessages?: Json[];
  /** The run's totals so far. */
  usage?: Usage;
  toolCallsCount?: number;
  /** The host's opaque loop state. */
  state?: Json;
  sessionId?: string;
}

export interface CheckpointResult {
  generation: number;
  message_count: number;
}

export interface CompleteRunOptions {
  usage?: Usage;
  toolCallsCount?: number;
  sessionId?: string;
}

export interface ResumeRunResult {
  run_id: string;
  resumed_from: string;
  session_id: string;
  messages: Json[];
  turn: number;
  usage: Usage;
  tool_calls_count: number;
  state?: Json;
  files_touched_after_checkpoint: string[] | null;
  files_tracked: boolean;
}

export interface StepSpec {
  stepId?: string;
  /** Alternative spelling of stepId. */
  step_id?: string;
  /** A digest of the step's spec; a change fails the workflow closed. */
  identity: string;
}

export interface StepRecord {
  step_id: string;
  identity: string;
  result?: Json;
  completed_at: string;
}

export interface ParallelStep<T = Json> extends StepSpec {
  /** Runs the step; its (JSON-serialisable) value is recorded as the step's result. */
  fn: () => T | Promise<T>;
}

export interface SessionSummary {
  session_id: string;
  generation: number;
  created_at: string;
  updated_at: string;
  message_count: number;
  runs?: Record<string, number>;
  checkpoints: number;
  size_bytes: number;
}

export interface ForkResult {
  session_id: string;
  generation: number;
}

export type ImportResult = ForkResult;

/** What changed in the workspace after a clock (see Client.changes). */
export interface ChangeSet {
  /** The clock to pass as `since` next time. */
  clock: string;
  /** The clock was unknown (none, another instance, too old): added lists every tracked path. */
  fresh_instance: boolean;
  added: string[];
  modified: string[];
  deleted: string[];
}

/** A required part the handoff lacks. */
export interface Missing {
  key: string;
  /** A sentence for people. */
  message: string;
}

/** HANDOFF.md rendered from the session's latest generation. */
export interface HandoffResult {
  session_id: string;
  generation: number;
  markdown: string;
  /** Nothing required is missing. */
  complete: boolean;
  missing: Missing[];
  /** The files changed in the session, per the workspace manifests. */
  files: Drift;
}

/** A recorded preview with the state of its process. */
export interface PreviewState {
  url: string;
  process?: string;
  state: string;
}

export interface RuntimeCheckResult {
  processes: ProcessState[];
  previews: PreviewState[];
}

/** What runtimeRestart did. */
export interface RuntimeRestartResult {
  name: string;
  outcome: 'started' | 'already_healthy' | 'failed' | string;
  /** The process's state when the restart returned. */
  state: string;
  /** The started process, which leads its own process group. */
  pid?: number;
  took_ms: number;
  detail?: string;
  /** The file the process's output went to. */
  log?: string;
  /** Recorded env_keys not set in the environment it started with (names only). */
  missing_env?: string[];
  /** Why it failed, when outcome is "failed". */
  error?: string;
}

export interface Event {
  /** "session.committed", "session.deleted", "run.checkpointed", "run.completed", "run.resumed", "workflow.step_completed". */
  event: string;
  data: Record<string, Json>;
}

export interface StatusResult {
  mode: 'embedded' | 'daemon';
  version: string;
  workspace: string;
  pid: number;
  daemon?: {
    server_version: string;
    protocol_version: number;
    workspace: string;
    socket: string;
    pid: number;
    started_at: string;
    uptime_ms: number;
    connections: number;
    subscribers: number;
    in_flight: number;
    requests: number;
    events_dropped: number;
    state: string;
    [key: string]: unknown;
  };
}

export class Subscription implements AsyncIterableIterator<Event> {
  readonly id: number;
  /** Events dropped because this subscriber fell behind (as last reported). */
  dropped: number;
  /** True once the subscription ended. */
  closed: boolean;
  /** How long each poll of the iterator waits (ms) before polling again. */
  pollMs: number;
  /** The next event, or null on timeout or when the subscription ended (see closed). */
  nextEvent(options?: { timeoutMs?: number }): Promise<Event | null>;
  next(): Promise<IteratorResult<Event>>;
  /** Unsubscribes (breaking out of for-await calls it). */
  return(): Promise<IteratorResult<Event>>;
  close(): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterableIterator<Event>;
}

export class Client {
  readonly handle: number;
  readonly options: ConnectOptions;
  /** Calls any method of the C API with JSON params. */
  call(method: string, params?: Json | object): Promise<any>;
  status(): Promise<StatusResult>;
  /** The daemon's hello (daemon mode) or the engine's (embedded mode). */
  hello(): Promise<Record<string, Json>>;
  /** Saves a snapshot or a delta change; resolves to the new generation. */
  save(sessionId: string, options: SaveOptions): Promise<number>;
  resumeSession(sessionId: string): Promise<ResumeSessionResult>;
  beginRun(sessionId: string, options?: { runId?: string }): Promise<BeginRunResult>;
  checkpoint(runId: string, options: CheckpointOptions): Promise<CheckpointResult>;
  completeRun(
    runId: string,
    status: 'completed' | 'failed' | 'interrupted',
    options?: CompleteRunOptions
  ): Promise<{ generation: number }>;
  resumeRun(runId: string, options?: { sessionId?: string; newRunId?: string }): Promise<ResumeRunResult>;
  /** Opens (or reopens) a workflow; resolves to the steps already completed, in spec order. */
  beginWorkflow(workflowId: string, steps: StepSpec[], options?: { sessionId?: string }): Promise<StepRecord[]>;
  completeStep(
    workflowId: string,
    stepId: string,
    identity: string,
    result?: Json,
    options?: { sessionId?: string }
  ): Promise<void>;
  finishWorkflow(workflowId: string): Promise<void>;
  /**
   * Runs the steps not yet recorded concurrently, records each success as it
   * lands, and resolves to every step's result in spec order. On a failure it
   * waits for the other steps, then rejects with the first failure; the
   * successes stay recorded. Does not call finishWorkflow.
   */
  parallelResumable<T = Json>(
    specs: ParallelStep<T>[],
    workflowId: string,
    options?: { sessionId?: string }
  ): Promise<T[]>;
  listSessions(): Promise<SessionSummary[]>;
  delete(sessionId: string): Promise<void>;
  fork(sessionId: string, newId: string, options?: { atGeneration?: number }): Promise<ForkResult>;
  /** The session's single-file JSON envelope. */
  export(sessionId: string): Promise<Record<string, Json>>;
  /** Imports an envelope (object, or its JSON text) or a bare session. */
  import(envelope: object | string | Buffer): Promise<ImportResult>;
  /** What changed in the workspace after the clock `since` (none: everything, fresh_instance true). */
  changes(options?: { since?: string }): Promise<ChangeSet>;
  /** HANDOFF.md for the session's latest generation, and what it lacks. */
  handoff(sessionId: string): Promise<HandoffResult>;
  /** Runs every recorded process's health check now; starts nothing. */
  runtimeCheck(sessionId: string, options?: { timeoutMs?: number }): Promise<RuntimeCheckResult>;
  /**
   * Brings one recorded process back unless it is healthy (started by the
   * daemon in daemon mode, by this process in embedded mode). A failure to
   * come up is outcome "failed", not a rejection.
   */
  runtimeRestart(sessionId: string, name: string, options?: { timeoutMs?: number }): Promise<RuntimeRestartResult>;
  subscribe(options?: { events?: string[] }): Promise<Subscription>;
  close(): Promise<void>;
}

export function connect(options?: ConnectOptions): Promise<Client>;
/** libcairn's version. */
export function version(): string;
/** How many libcairn handles are open in this process. */
export function openHandles(): number;
export function errorClassFor(code: string): typeof CairnError;
/** Every error code, each with its class. */
export const codes: string[];

export class CairnError extends Error {
  constructor(code: string, message: string, rc?: number);
  /** The stable error code, e.g. "not_found". */
  readonly code: string;
  /** The C return code (negative), when known. */
  readonly rc?: number;
}
export class InternalError extends CairnError { constructor(message: string, rc?: number); }
export class InvalidArgumentError extends CairnError { constructor(message: string, rc?: number); }
export class NotFoundError extends CairnError { constructor(message: string, rc?: number); }
export class ConflictError extends CairnError { constructor(message: string, rc?: number); }
export class SchemaUnsupportedError extends CairnError { constructor(message: string, rc?: number); }
export class TooLargeError extends CairnError { constructor(message: string, rc?: number); }
export class NoCheckpointError extends CairnError { constructor(message: string, rc?: number); }
export class NotOwnerError extends CairnError { constructor(message: string, rc?: number); }
export class StepIdentityChangedError extends CairnError { constructor(message: string, rc?: number); }
export class LockedError extends CairnError { constructor(message: string, rc?: number); }
export class UnavailableError extends CairnError { constructor(message: string, rc?: number); }
export class ForkedError extends CairnError { constructor(message: string, rc?: number); }
export class BadHandleError extends CairnError { constructor(message: string, rc?: number); }
export class MethodNotFoundError extends CairnError { constructor(message: string, rc?: number); }
export class BadRequestError extends CairnError { constructor(message: string, rc?: number); }
/** A completion ticket the library does not know (a bug in the binding). */
export class BadTicketError extends CairnError { constructor(message: string, rc?: number); }
