// Declarations of cairn-sessions/langgraph: a LangGraph.js checkpointer
// that keeps each thread in a cairn session (see langgraph.js for the
// mapping).
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import type { Client, ConnectOptions } from './index.js';

export interface CairnSaverOptions {
  /** A connected cairn client; the saver does not close it. */
  client: Client;
  /** Prepended to a thread id to name its session (default "langgraph:"). */
  sessionPrefix?: string;
  serde?: SerializerProtocol;
}

export declare const KIND_CHECKPOINT: 'langgraph.checkpoint';
export declare const KIND_WRITES: 'langgraph.writes';
export declare const KIND_BLOB: 'langgraph.blob';
export declare const KIND_LATEST: 'langgraph.latest';
export declare const KIND_NAMESPACES: 'langgraph.namespaces';

/** A LangGraph.js checkpointer over cairn: one session per thread. */
export declare class CairnSaver extends BaseCheckpointSaver {
  constructor(options: CairnSaverOptions);
  /** Opens a client with connect(options) and a saver that closes it on close(). */
  static connect(options?: ConnectOptions, saverOptions?: { sessionPrefix?: string; serde?: SerializerProtocol }): Promise<CairnSaver>;
  readonly client: Client;
  readonly sessionPrefix: string;
  /** The session that holds a thread. */
  sessionId(threadId: string): string;
  /** Closes the client when connect() opened it. */
  close(): Promise<void>;
  getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined>;
  list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple>;
  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig>;
  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void>;
  deleteThread(threadId: string): Promise<void>;
}
