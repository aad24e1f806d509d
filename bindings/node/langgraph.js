'use strict';
// cairn-sessions/langgraph — a LangGraph.js checkpointer over cairn.
//
// How LangGraph's data maps onto a cairn session:
//   - a thread is a session, named sessionPrefix + thread_id
//     ("langgraph:" + thread_id unless told otherwise);
//   - a checkpoint is an artifact of kind "langgraph.checkpoint": its data
//     is the serialized checkpoint without its channel values, its metadata
//     {ns, id, parent, type, meta, meta_type} names the namespace, the
//     checkpoint id, the parent checkpoint id and the serialized
//     CheckpointMetadata (base64), so list() filters without reading data;
//   - a channel value is an artifact of kind "langgraph.blob", one per
//     (namespace, channel, version), saved only by the put whose
//     newVersions names it: a checkpoint's channel_versions say which
//     blobs make up its channel_values, so an unchanged channel is not
//     stored again;
//   - a pending write is an artifact of kind "langgraph.write": its data
//     is the serialized value, its metadata {ns, checkpoint_id, task_id,
//     task_path, idx, channel, type} places it.
// Every write is one delta save (put_artifacts / append_artifacts), never
// a whole-session rewrite; every read is the artifact metadata listing
// plus the one artifact per checkpoint and write it returns, never a
// whole-session read. deleteThread deletes the session inside cairn.
// Errors are told by code, not class: a bundler or test runner may load
// index.js twice, and then its classes differ.
//
// For crash safety run graphs with durability "sync": LangGraph then waits
// for each checkpoint to be saved before it starts the next step, so a
// process killed mid-step resumes from the last finished step; with
// "async" the last checkpoint may still be in flight when the process dies.

const crypto = require('crypto');
const lg = require('@langchain/langgraph-checkpoint');
const cairn = require('./index.js');

const {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
} = lg;

const KIND_CHECKPOINT = 'langgraph.checkpoint';
const KIND_WRITE = 'langgraph.write';
const KIND_BLOB = 'langgraph.blob';
// Artifact ids longer than this are replaced by a digest (ids are capped at
// 256 bytes; a nested namespace can be long): the metadata carries the
// parts, so the id only has to be unique.
const MAX_ARTIFACT_ID = 200;

function artifactId(parts) {
  const id = parts.join('/');
  if (Buffer.byteLength(id) <= MAX_ARTIFACT_ID) return id;
  return `${parts[0]}#${crypto.createHash('sha256').update(JSON.stringify(parts)).digest('hex')}`;
}

function b64(u8) {
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('base64');
}

function unb64(s) {
  return new Uint8Array(Buffer.from(s || '', 'base64'));
}

function missingThread(what) {
  return new Error(
    `Failed to ${what}. The passed RunnableConfig is missing a required "thread_id" field in its "configurable" property.`
  );
}

/**
 * CairnSaver is a LangGraph.js BaseCheckpointSaver that keeps each thread
 * in a cairn session. Give it a connected client (`new CairnSaver({client})`)
 * or let it open one (`await CairnSaver.connect(options)`, closed by
 * `close()`).
 */
class CairnSaver extends BaseCheckpointSaver {
  constructor({ client, sessionPrefix = 'langgraph:', serde } = {}) {
    super(serde);
    if (!client) throw new TypeError('CairnSaver: client is required (or use CairnSaver.connect)');
    this.client = client;
    this.sessionPrefix = sessionPrefix;
    this._ownsClient = false;
  }

  /** Opens a client with cairn.connect(options) and a saver over it. */
  static async connect(options = {}, { sessionPrefix, serde } = {}) {
    const client = await cairn.connect(options);
    const saver = new CairnSaver({ client, sessionPrefix, serde });
    saver._ownsClient = true;
    return saver;
  }

  /** Closes the client when this saver opened it. */
  async close() {
    if (this._ownsClient) await this.client.close();
  }

  /** The session that holds a thread. */
  sessionId(threadId) {
    return this.sessionPrefix + String(threadId);
  }

  // The artifact metadata of a thread's session (no data), or null when
  // the session does not exist.
  async _index(threadId) {
    try {
      const r = await this.client.artifacts(this.sessionId(threadId));
      return r.artifacts || [];
    } catch (err) {
      if (err.code === 'not_found') return null;
      throw err;
    }
  }

  // Saves a delta of artifacts to a thread's session, creating the session
  // (expecting generation 0, so a racing creator is not overwritten) when
  // it does not exist yet.
  async _save(threadId, put, append = []) {
    const sid = this.sessionId(threadId);
    try {
      await this.client.save(sid, { change: { put_artifacts: put, append_artifacts: append } });
      return;
    } catch (err) {
      if (!(err.code === 'not_found')) throw err;
    }
    try {
      await this.client.save(sid, { snapshot: { messages: [], artifacts: [...put, ...append] }, expectGeneration: 0 });
    } catch (err) {
      if (!(err.code === 'conflict')) throw err;
      await this.client.save(sid, { change: { put_artifacts: put, append_artifacts: append } });
    }
  }

  async _data(threadId, id) {
    const r = await this.client.artifact(this.sessionId(threadId), id);
    return unb64(r.artifact.data);
  }

  // The writes of one checkpoint, as index entries, in writesSortKey order.
  _writesOf(index, ns, checkpointId) {
    const ws = index.filter(
      (a) => a.kind === KIND_WRITE && a.metadata && a.metadata.ns === ns && a.metadata.checkpoint_id === checkpointId
    );
    const key = (a) => writesSortKey(a.metadata.task_path || '', a.metadata.task_id, a.metadata.idx);
    ws.sort((x, y) => compareWritesSortKeys(key(x), key(y)));
    return ws;
  }

  async _loadWrites(threadId, entries) {
    return Promise.all(
      entries.map(async (a) => [
        a.metadata.task_id,
        a.metadata.channel,
        await this.serde.loadsTyped(a.metadata.type, await this._data(threadId, a.id)),
      ])
    );
  }

  // The checkpoint entries of one namespace, newest first (ids are uuid6,
  // which sort by time).
  _checkpointsOf(index, ns) {
    return index
      .filter((a) => a.kind === KIND_CHECKPOINT && a.metadata && a.metadata.ns === ns)
      .sort((x, y) => (x.metadata.id < y.metadata.id ? 1 : x.metadata.id > y.metadata.id ? -1 : 0));
  }

  async _metadataOf(entry) {
    return this.serde.loadsTyped(entry.metadata.meta_type || 'json', unb64(entry.metadata.meta));
  }

  // The tuple of one checkpoint entry.
  async _tuple(threadId, index, entry, metadata) {
    const { ns, id, parent } = entry.metadata;
    const [data, pendingWrites, meta] = await Promise.all([
      this._data(threadId, entry.id),
      this._loadWrites(threadId, this._writesOf(index, ns, id)),
      metadata === undefined ? this._metadataOf(entry) : metadata,
    ]);
    const checkpoint = await this._withValues(threadId, index, entry, data);
    if (checkpoint.v < 4 && parent) await this._migratePendingSends(checkpoint, threadId, index, ns, parent);
    const tuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } },
      checkpoint,
      metadata: meta,
      pendingWrites,
    };
    if (parent) tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: parent } };
    return tuple;
  }

  // The checkpoint of an entry, its channel_values filled in from the blobs
  // its channel_versions name (data: the entry's data, when read already).
  async _withValues(threadId, index, entry, data) {
    const checkpoint = await this.serde.loadsTyped(entry.metadata.type, data || (await this._data(threadId, entry.id)));
    const ns = entry.metadata.ns;
    const blobs = new Map();
    for (const a of index) {
      if (a.kind === KIND_BLOB && a.metadata && a.metadata.ns === ns) blobs.set(`${a.metadata.channel}\u0000${a.metadata.version}`, a);
    }
    const values = {};
    await Promise.all(
      Object.entries(checkpoint.channel_versions || {}).map(async ([ch, ver]) => {
        const b = blobs.get(`${ch}\u0000${String(ver)}`);
        if (b) values[ch] = await this.serde.loadsTyped(b.metadata.type, await this._data(threadId, b.id));
      })
    );
    checkpoint.channel_values = values;
    return checkpoint;
  }

  // Checkpoints before format 4 kept pending sends as the parent's TASKS
  // writes; newer LangGraph expects them in channel_values.
  async _migratePendingSends(checkpoint, threadId, index, ns, parent) {
    const sends = this._writesOf(index, ns, parent).filter((a) => a.metadata.channel === TASKS);
    const values = await this._loadWrites(threadId, sends);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = values.map((w) => w[2]);
    checkpoint.channel_versions ??= {};
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.getNextVersion(undefined);
  }

  async getTuple(config) {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) return undefined;
    const ns = config.configurable?.checkpoint_ns ?? '';
    const checkpointId = getCheckpointId(config);
    const index = await this._index(threadId);
    if (!index) return undefined;
    const cps = this._checkpointsOf(index, ns);
    const entry = checkpointId ? cps.find((a) => a.metadata.id === checkpointId) : cps[0];
    if (!entry) return undefined;
    const tuple = await this._tuple(String(threadId), index, entry);
    if (checkpointId) tuple.config = config;
    return tuple;
  }

  async *list(config, options = {}) {
    const { before, filter } = options;
    let { limit } = options;
    const threadId = config.configurable?.thread_id;
    let threads;
    if (threadId !== undefined && threadId !== null && threadId !== '') {
      threads = [String(threadId)];
    } else {
      const { sessions } = await this.client.call('list', {});
      threads = sessions
        .map((s) => s.session_id)
        .filter((id) => id.startsWith(this.sessionPrefix))
        .map((id) => id.slice(this.sessionPrefix.length))
        .sort();
    }
    const wantNs = config.configurable?.checkpoint_ns;
    const wantId = config.configurable?.checkpoint_id;
    const beforeId = before?.configurable?.checkpoint_id;
    for (const thread of threads) {
      const index = await this._index(thread);
      if (!index) continue;
      const namespaces = [
        ...new Set(index.filter((a) => a.kind === KIND_CHECKPOINT && a.metadata).map((a) => a.metadata.ns)),
      ].sort();
      for (const ns of namespaces) {
        if (wantNs !== undefined && ns !== wantNs) continue;
        for (const entry of this._checkpointsOf(index, ns)) {
          const id = entry.metadata.id;
          if (wantId && id !== wantId) continue;
          if (beforeId && id >= beforeId) continue;
          const metadata = await this._metadataOf(entry);
          if (filter && !Object.entries(filter).every(([k, v]) => metadata[k] === v)) continue;
          if (limit !== undefined) {
            if (limit <= 0) return;
            limit -= 1;
          }
          yield await this._tuple(thread, index, entry, metadata);
        }
      }
    }
  }

  async put(config, checkpoint, metadata, newVersions = {}) {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) throw missingThread('put checkpoint');
    const ns = config.configurable?.checkpoint_ns ?? '';
    const prepared = copyCheckpoint(checkpoint);
    const values = prepared.channel_values || {};
    prepared.channel_values = {};
    const blobs = await Promise.all(
      Object.entries(newVersions)
        .filter(([ch]) => Object.prototype.hasOwnProperty.call(values, ch))
        .map(async ([ch, ver]) => {
          const [btype, bdata] = await this.serde.dumpsTyped(values[ch]);
          return {
            id: artifactId(['b', ns, ch, String(ver)]),
            kind: KIND_BLOB,
            data: b64(bdata),
            metadata: { ns, channel: ch, version: String(ver), type: btype },
          };
        })
    );
    const [[type, data], [metaType, meta]] = await Promise.all([
      this.serde.dumpsTyped(prepared),
      this.serde.dumpsTyped(metadata),
    ]);
    const parent = config.configurable?.checkpoint_id || null;
    await this._save(threadId, [
      ...blobs,
      {
        id: artifactId(['c', ns, checkpoint.id]),
        kind: KIND_CHECKPOINT,
        data: b64(data),
        metadata: { ns, id: checkpoint.id, parent, type, meta: b64(meta), meta_type: metaType },
      },
    ]);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(config, writes, taskId, taskPath) {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) throw missingThread('put writes');
    const ns = config.configurable?.checkpoint_ns ?? '';
    const checkpointId = config.configurable?.checkpoint_id;
    if (checkpointId === undefined) {
      throw new Error('Failed to put writes. The passed RunnableConfig is missing a required "checkpoint_id" field in its "configurable" property.');
    }
    // Special channels (negative idx) replace what was there; ordinary
    // writes are kept once, as LangGraph retries a task's writes.
    const replace = [];
    const once = [];
    await Promise.all(
      writes.map(async ([channel, value], i) => {
        const idx = WRITES_IDX_MAP[channel] || i;
        const [type, data] = await this.serde.dumpsTyped(value);
        const a = {
          id: artifactId(['w', ns, checkpointId, taskId, String(idx)]),
          kind: KIND_WRITE,
          data: b64(data),
          metadata: { ns, checkpoint_id: checkpointId, task_id: taskId, task_path: taskPath ?? '', idx, channel, type },
        };
        (idx >= 0 ? once : replace)[i] = a;
      })
    );
    const put = replace.filter(Boolean);
    let append = once.filter(Boolean);
    try {
      await this._save(threadId, put, append);
    } catch (err) {
      if (!(err.code === 'conflict')) throw err;
      // Some of these writes were saved before: keep those, add the rest.
      const held = new Set(((await this._index(threadId)) || []).map((a) => a.id));
      append = append.filter((a) => !held.has(a.id));
      if (put.length || append.length) await this._save(threadId, put, append);
    }
  }

  async deleteThread(threadId) {
    try {
      await this.client.delete(this.sessionId(threadId));
    } catch (err) {
      if (!(err.code === 'not_found')) throw err;
    }
  }

  /**
   * Walks the parent chain once for all requested channels, on one
   * artifact listing (see BaseCheckpointSaver.getDeltaChannelHistory).
   */
  async getDeltaChannelHistory({ config, channels }) {
    if (channels.length === 0) return {};
    const threadId = config.configurable?.thread_id;
    const ns = config.configurable?.checkpoint_ns ?? '';
    const index = (threadId === undefined ? null : await this._index(threadId)) || [];
    const cps = this._checkpointsOf(index, ns);
    const byId = new Map(cps.map((a) => [a.metadata.id, a]));
    const start = getCheckpointId(config) ? byId.get(getCheckpointId(config)) : cps[0];
    const chain = [];
    let current = start?.metadata.parent;
    while (current) {
      const e = byId.get(current);
      if (!e) break;
      chain.push(e);
      current = e.metadata.parent;
    }
    const collected = {};
    const seed = {};
    const remaining = new Set(channels);
    for (const ch of channels) collected[ch] = [];
    for (const entry of chain) {
      if (remaining.size === 0) break;
      const ckpt = await this._withValues(threadId, index, entry);
      const here = new Map();
      for (const ch of remaining) {
        if (Object.prototype.hasOwnProperty.call(ckpt.channel_values, ch) && ckpt.channel_values[ch] !== undefined) {
          here.set(ch, ckpt.channel_values[ch]);
        }
      }
      const stepWrites = this._writesOf(index, ns, entry.metadata.id).filter((a) => remaining.has(a.metadata.channel));
      const loaded = await this._loadWrites(threadId, stepWrites);
      for (let i = loaded.length - 1; i >= 0; i -= 1) collected[loaded[i][1]].push(loaded[i]);
      for (const [ch, v] of here) {
        seed[ch] = v;
        remaining.delete(ch);
      }
    }
    const result = {};
    for (const ch of channels) {
      const h = { writes: collected[ch].slice().reverse() };
      if (Object.prototype.hasOwnProperty.call(seed, ch)) h.seed = seed[ch];
      result[ch] = h;
    }
    return result;
  }
}

module.exports = { CairnSaver, KIND_CHECKPOINT, KIND_WRITE, KIND_BLOB };
