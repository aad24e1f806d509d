// Type declarations of the cairn Node.js binding (index.js).
//
// Method names and options are camelCase. The documents that travel through
// cairn (snapshots, changes, results, envelopes) keep their wire names
// (snake_case, as in protocol/PROTOCOL.md and the C API's JSON), because
// they are the stored format shared with every other language: their types
// are generated from api/schema.json into wire.d.ts, with the Go type names,
// and re-exported here. Opaque host values (messages, state, step results,
// metadata values) are any JSON value.

import type {
  Artifact,
  ArtifactResult,
  ArtifactsResult,
  ArtifactsByIDResult,
  BeginRunResult,
  Change,
  ChangeSet,
  CheckpointResult,
  CompleteRunResult,
  Envelope,
  Event,
  ExportFileResult,
  ForkResult,
  HandoffResult,
  HelloResult,
  ImportResult,
  Json,
  LibStatus,
  MessagesResult,
  Methods,
  RepairReport,
  RestartResult,
  ResumeRunResult,
  ResumeSessionResult,
  RunEventsResult,
  RunResult,
  RunsResult,
  RuntimeCheckResult,
  Snapshot,
  StepRecord,
  Summary,
  Usage,
  VerifyReport,
  VerifyRequest,
} from './wire';

export * from './wire';

export interface ConnectOptions {
  /** Directory of the workspace (default: the nearest folder at or above the current directory holding .cairn/, else .git, else the current directory). */
  workspace?: string;
  /** Run the engine in this process (takes the workspace's store lock). Default false: daemon mode. */
  embedded?: boolean;
  /** Path of the cairnd executable to start (default: CAIRN_DAEMON, then next to the loaded libcairn, then next to the running executable, then PATH). */
  daemon?: string;
  /** false: fail with UnavailableError instead of starting a daemon (default true). */
  autoStart?: boolean;
  /** Extra arguments for a daemon this call starts, e.g. ["--idle-timeout=30s"]. */
  daemonArgs?: string[];
  /** A postgres:// URL: keep the sessions in that PostgreSQL database, shared with every host using it. */
  store?: string;
  /**
   * Daemon mode: how long each call waits for the daemon, its request's sending included, in milliseconds
   * (a fraction is rounded up). Past it the call rejects with UnavailableError ("no answer to <method> from
   * cairnd within ..."), its outcome unknown. 0 to 86400000; default 5 minutes, libcairn's (long enough that only a
   * stopped or stuck daemon reaches it); 0: no bound. It never bounds verify, repair, export, exportFile, import,
   * importFile, fork, runtimeCheck and runtimeRestart, whose work grows with the store or that have a timeout of their
   * own. Embedded mode ignores it.
   */
  callTimeoutMs?: number;
}

/** An artifact as save takes it: its data may be bytes, sent as base64. */
export type ArtifactArg = Omit<Artifact, 'data'> & { data?: string | Uint8Array };

/** A Change as save takes it: artifact data may be bytes. */
export type ChangeArg = Omit<Change, 'append_artifacts' | 'put_artifacts'> & {
  /** New artifacts; an id the session already holds is a ConflictError naming it. */
  append_artifacts?: ArtifactArg[];
  /** Artifacts added or replaced by id. */
  put_artifacts?: ArtifactArg[];
};

/** A Snapshot as save takes it: what the library owns may be left out, artifact data may be bytes. */
export type SnapshotArg = Partial<Omit<Snapshot, 'artifacts'>> & { artifacts?: ArtifactArg[] };

export interface RepairOptions {
  /** The session to repair (or give it as the first argument). */
  sessionId?: string;
  /** The workflow to repair, instead of a session. */
  workflowId?: string;
  /** Write the repair; without it, repair only reports (default false). */
  apply?: boolean;
}

export interface SaveOptions {
  /** A whole snapshot; the library fills in what it owns (generation, times). */
  snapshot?: SnapshotArg;
  /** A delta commit. */
  change?: ChangeArg;
  /** Fail with ConflictError unless the session is at this generation. */
  expectGeneration?: number;
}

export interface ResumeSessionOptions {
  /** Only the last N messages (the result's messages_from says where they start). */
  messagesTail?: number;
  /** 'full' (default): with data; 'metadata': without data; 'none': no artifacts. */
  artifacts?: 'full' | 'metadata' | 'none';
  /** 'all' (default) or 'none'. */
  traces?: 'all' | 'none';
  /** false: skip workspace drift (reported as not tracked). Default true. */
  drift?: boolean;
  /** false: skip the process health checks (processes is empty). Default true. */
  processes?: boolean;
}

/**
 * The paging of a read: at most `limit` items and, past the first, at most
 * `maxBytes` of them (0 or none: no limit). A page of a non-empty range
 * holds at least one item; while the result's `more`, ask again from its `next`.
 */
export interface PageOptions {
  /** Index of the first item (default 0). */
  from?: number;
  /** Items added (or committed) after this generation, instead of from/to. */
  sinceGeneration?: number;
  limit?: number;
  maxBytes?: number;
}

export interface MessagesOptions extends PageOptions {
  /** End of the range, exclusive (0 or none: the end). */
  to?: number;
  /** The last N messages, instead of from/to/sinceGeneration. */
  tail?: number;
}

export interface RunEventsOptions extends PageOptions {
  /** The session that records the run (else NotOwnerError). */
  sessionId?: string;
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

export interface CompleteRunOptions {
  usage?: Usage;
  toolCallsCount?: number;
  sessionId?: string;
}

/** A workflow step as the client methods take it. */
export interface StepArg {
  stepId?: string;
  /** Alternative spelling of stepId. */
  step_id?: string;
  /** A digest of the step's spec; a change fails the workflow closed. */
  identity: string;
}

export interface ParallelStep<T = Json> extends StepArg {
  /** Runs the step; its (JSON-serialisable) value is recorded as the step's result. */
  fn: () => T | Promise<T>;
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
  /** Calls any method of the C API with its JSON params. */
  call<M extends keyof Methods>(method: M, params?: Methods[M]['params']): Promise<Methods[M]['result']>;
  call(method: string, params?: Json | object): Promise<any>;
  status(): Promise<LibStatus>;
  /** The daemon's hello (daemon mode) or the engine's (embedded mode). */
  hello(): Promise<HelloResult>;
  /** Saves a snapshot or a delta change; resolves to the new generation. */
  save(sessionId: string, options: SaveOptions): Promise<number>;
  /** The session for a new agent: by default the whole of it, with drift and process checks. */
  resumeSession(sessionId: string, options?: ResumeSessionOptions): Promise<ResumeSessionResult>;
  /** Generation, counts, sizes and times; no content. */
  summary(sessionId: string): Promise<Summary>;
  /** A page of messages: a range by index, the last `tail`, or those since a generation. */
  messages(sessionId: string, options?: MessagesOptions): Promise<MessagesResult>;
  /** One artifact with its data (base64). */
  artifact(sessionId: string, artifactId: string): Promise<ArtifactResult>;
  /** One artifact's data as bytes (a Buffer). */
  artifactBytes(sessionId: string, artifactId: string): Promise<Uint8Array>;
  /** Every artifact without its data. */
  artifacts(sessionId: string): Promise<ArtifactsResult>;
  /**
   * The named artifacts the session holds, with their data (base64), in the
   * order named; ids it does not hold are skipped. At most 1,024 distinct
   * ids; `next` is how many of them the answer covers (ask again from there
   * when it is short of all).
   */
  artifactsByID(sessionId: string, artifactIds: string[]): Promise<ArtifactsByIDResult>;
  /** One run, its latest loop checkpoint and the run that resumed it. */
  run(runId: string, options?: { sessionId?: string }): Promise<RunResult>;
  runs(sessionId: string): Promise<RunsResult>;
  /** A page of a run's traces and kept loop checkpoints, in commit order. */
  runEvents(runId: string, options?: RunEventsOptions): Promise<RunEventsResult>;
  beginRun(sessionId: string, options?: { runId?: string }): Promise<BeginRunResult>;
  checkpoint(runId: string, options: CheckpointOptions): Promise<CheckpointResult>;
  completeRun(
    runId: string,
    status: 'completed' | 'failed' | 'interrupted',
    options?: CompleteRunOptions
  ): Promise<CompleteRunResult>;
  resumeRun(runId: string, options?: { sessionId?: string; newRunId?: string; takeover?: boolean }): Promise<ResumeRunResult>;
  /**
   * Starts a run for a host's own loop: run.turn() checkpoints each finished
   * tool turn, run.complete() ends it. resume: true picks up the session's
   * interrupted run from its last finished turn (a new run when none).
   */
  startRun(sessionId: string, options?: StartRunOptions): Promise<AgentRun>;
  /** startRun, then fn(run); completes the run when fn returns (an error leaves it resumable). */
  withRun<T>(sessionId: string, fn: (run: AgentRun) => Promise<T>): Promise<T>;
  withRun<T>(sessionId: string, options: StartRunOptions, fn: (run: AgentRun) => Promise<T>): Promise<T>;
  /** Opens (or reopens) a workflow; resolves to the steps already completed, in spec order. */
  beginWorkflow(workflowId: string, steps: StepArg[], options?: { sessionId?: string }): Promise<StepRecord[]>;
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
  listSessions(): Promise<Summary[]>;
  delete(sessionId: string): Promise<void>;
  fork(sessionId: string, newId: string, options?: { atGeneration?: number }): Promise<ForkResult>;
  /** The session's single-file JSON envelope. */
  export(sessionId: string): Promise<Envelope>;
  /**
   * Writes the session's envelope into a file, page by page, renamed into
   * place when complete (by the daemon in daemon mode). A relative path is
   * resolved against this process's working directory.
   */
  exportFile(sessionId: string, path: string): Promise<ExportFileResult>;
  /** Imports the envelope (or bare session) in a file; a relative path is resolved here. */
  importFile(path: string): Promise<ImportResult>;
  /** Imports an envelope (object, or its JSON text as a string or bytes) or a bare session. */
  import(envelope: object | string | Uint8Array): Promise<ImportResult>;
  /**
   * Reads and checks every record of every log the store keeps (and the
   * workspace manifests); ok when it finds no problem. With
   * { secrets: true }, also scans every session's content for
   * credential-shaped strings and lists where each is (report.secrets),
   * redacted; nothing is changed.
   */
  verify(options?: VerifyRequest): Promise<VerifyReport>;
  /**
   * Salvages a damaged session log (repair('s1', { apply: true })) or
   * workflow log (repair({ workflowId: 'wf', apply: true })): what it keeps
   * and what it cannot. Writes nothing unless apply; then the original
   * bytes are kept in the file `quarantine` names.
   */
  repair(sessionId: string, options?: RepairOptions): Promise<RepairReport>;
  repair(options: RepairOptions & ({ sessionId: string } | { workflowId: string })): Promise<RepairReport>;
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
  runtimeRestart(sessionId: string, name: string, options?: { timeoutMs?: number }): Promise<RestartResult>;
  subscribe(options?: { events?: string[] }): Promise<Subscription>;
  close(): Promise<void>;
}

export function connect(options?: ConnectOptions): Promise<Client>;
/** libcairn's version. */
export function version(): string;
/** The path of the libcairn this process loaded (loading it if needed). */
export function libraryPath(): string;
/** How many libcairn handles are open in this process. */
export function openHandles(): number;
export function errorClassFor(code: string): typeof CairnError;
/** Every error code, each with its class. */
export const codes: string[];

export interface StartRunOptions {
  /** Pick up the session's interrupted run, if it has one. */
  resume?: boolean;
  /** The new run's id (default: one cairn makes). */
  runId?: string;
}

export interface TurnOptions {
  /** What this turn spent; added to the run's totals. */
  usage?: Partial<Usage>;
  /** The turn's tool calls, or their count. */
  toolCalls?: number | unknown[];
  /** A state to resume with. */
  state?: Json;
}

/** One agent run of a session, checkpointed turn by turn (startRun/withRun). */
export class AgentRun {
  readonly client: Client;
  readonly sessionId: string;
  readonly runId: string;
  /** The run this one resumed, or null. */
  readonly resumedFrom: string | null;
  readonly resumed: boolean;
  /** The last finished turn (0 before the first). */
  readonly turns: number;
  /** Usage totals over the run line, resumed runs included. */
  readonly usage: Usage;
  readonly toolCallsCount: number;
  readonly state: Json | undefined;
  /** On resume: the session's messages up to the last finished turn. */
  readonly messages: Json[];
  readonly done: boolean;
  /**
   * Checkpoints one finished turn; resolves to its number. When the
   * previous turn's checkpoint failed with UnavailableError (its outcome
   * unknown), it first reads the run to settle it: a committed one is
   * counted, and a call with the same arguments (the host retrying it)
   * resolves to its number without saving it twice.
   */
  turn(newMessages?: Json[], options?: TurnOptions): Promise<number>;
  /** Ends the run with its totals, after settling a turn of unknown outcome. */
  complete(status?: 'completed' | 'failed' | 'interrupted'): Promise<void>;
  fail(): Promise<void>;
}

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
/** A log or file of the store is damaged (`cairn verify`, `cairn repair`). */
export class CorruptError extends CairnError { constructor(message: string, rc?: number); }
/** The file system is full, or a quota or file size limit is reached; nothing was written: retry after freeing space. */
export class NoSpaceError extends CairnError { constructor(message: string, rc?: number); }
