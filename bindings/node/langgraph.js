'use strict';
// cairn-sessions/langgraph — a LangGraph.js checkpointer over cairn.
//
// How LangGraph's data maps onto a cairn session:
//   - a thread is a session, named sessionPrefix + thread_id
//     ("langgraph:" + thread_id unless told otherwise);
//   - a checkpoint is an artifact of kind "langgraph.checkpoint", id
//     c/<ns>/<checkpoint id>: its data is the serialized
//     CheckpointMetadata, length-prefixed (4 bytes, big-endian), then the
//     serialized checkpoint without its channel values; its metadata
//     {ns, id, parent, type, meta_type} names the namespace, the
//     checkpoint id and the parent checkpoint id. (Both serialized values
//     are content, which cairn keeps byte for byte; artifact metadata is
//     scrubbed of credential-shaped strings, so none is kept there.)
//   - a channel value is an artifact of kind "langgraph.blob", id
//     b/<ns>/<channel>/<version>, saved only by the put whose newVersions
//     names it: a checkpoint's channel_versions name the blobs that make
//     up its channel_values, so an unchanged channel is not stored again;
//   - the pending writes of a checkpoint are one artifact of kind
//     "langgraph.writes", id w/<ns>/<checkpoint id> (a JSON list);
//   - the latest checkpoint of a namespace is named by an artifact of kind
//     "langgraph.latest", id l/<ns>; the namespaces by one of kind
//     "langgraph.namespaces", id n;
//   - the session's messages are the checkpoint log: each put appends
//     {langgraph: "checkpoint", ns, id, parent, meta, meta_type, prev_max},
//     prev_max being the namespace's latest checkpoint id before it (every
//     earlier entry of the namespace has an id no greater).
// (An id longer than 200 bytes is replaced by a digest of its parts.)
// So getTuple reads the pointer, the checkpoint, its writes and its
// channels' blobs by id, in one artifactsByID call when this saver knows
// the latest checkpoint and its blobs' ids (it put or read it: the pointer
// read along says whether it is still the latest), and list() reads the log
// backwards from its tail, a page at a time, emitting an entry as soon as
// prev_max proves no earlier entry sorts before it: neither grows with
// the thread (list's `before` and a selective `filter` read back as far as
// their matches). put and putWrites are one delta save each, after one
// artifact read, with compare-and-swap on the session's generation (a lost
// race is retried). deleteThread deletes the session inside cairn.
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
const KIND_WRITES = 'langgraph.writes';
const KIND_BLOB = 'langgraph.blob';
const KIND_LATEST = 'langgraph.latest';
const KIND_NAMESPACES = 'langgraph.namespaces';
const NAMESPACES_ID = 'n';
// Messages read per page of the checkpoint log.
const LOG_PAGE = 64;
// Checkpoints list() reads at once.
const LIST_BATCH = 16;
// Artifact ids are capped at 256 bytes and a nested namespace can be long:
// past this, an id is a digest of its parts (the metadata carries them).
const MAX_ARTIFACT_ID = 200;
// Compare-and-swap retries before a put or putWrites gives up.
const MAX_ATTEMPTS = 100;
// The most ids one artifactsByID call takes (api.MaxArtifactIDs).
const MAX_IDS = 1024;
// Checkpoints whose blob ids are remembered, for getTuple's one read.
const BLOB_IDS_CACHED = 1024;

function artifactId(parts) {
  const id = parts.join('/');
  if (Buffer.byteLength(id) <= MAX_ARTIFACT_ID) return id;
  return `${parts[0]}#${crypto.createHash('sha256').update(JSON.stringify(parts)).digest('hex')}`;
}

const checkpointKey = (ns, id) => artifactId(['c', ns, id]);
const writesKey = (ns, id) => artifactId(['w', ns, id]);
const blobKey = (ns, channel, version) => artifactId(['b', ns, channel, String(version)]);
const latestKey = (ns) => artifactId(['l', ns]);

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

// A checkpoint artifact's data: the metadata, length-prefixed, then the
// checkpoint (base64, as the wire has it).
function joinData(meta, checkpoint) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(meta.byteLength);
  return Buffer.concat([len, Buffer.from(meta.buffer, meta.byteOffset, meta.byteLength), Buffer.from(checkpoint.buffer, checkpoint.byteOffset, checkpoint.byteLength)]).toString('base64');
}

function splitData(data) {
  const b = Buffer.from(data || '', 'base64');
  const n = b.readUInt32BE(0);
  return { meta: new Uint8Array(b.subarray(4, 4 + n)), checkpoint: new Uint8Array(b.subarray(4 + n)) };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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
    // thread id -> the tail of its chain of read-modify-write saves: this
    // process's saves to one thread queue, so they do not fail each
    // other's compare-and-swap; other processes' are retried.
    this._chains = new Map();
    // session + ns -> the latest checkpoint id this saver put or read, and
    // checkpoint artifact id -> its blobs' ids (a checkpoint's
    // channel_versions never change): getTuple's guesses, each checked
    // against what the read returns.
    this._latest = new Map();
    this._blobIds = new Map();
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

  // Runs fn after this process's earlier saves to the thread, retrying it
  // while its compare-and-swap loses to another writer.
  _serial(threadId, fn) {
    const key = String(threadId);
    const prev = this._chains.get(key) || Promise.resolve();
    const run = prev.then(async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await fn();
        } catch (err) {
          if (err.code !== 'conflict' || attempt >= MAX_ATTEMPTS) throw err;
          await sleep(Math.random() * Math.min(50, attempt * 2));
        }
      }
    });
    const tail = run.catch(() => {});
    this._chains.set(key, tail);
    tail.then(() => {
      if (this._chains.get(key) === tail) this._chains.delete(key);
    });
    return run;
  }

  // One artifact with its data and the generation read, or null when the
  // session or the artifact does not exist.
  async _get(threadId, id) {
    try {
      return await this.client.artifact(this.sessionId(threadId), id);
    } catch (err) {
      if (err.code === 'not_found') return null;
      throw err;
    }
  }

  // Artifacts of a thread by id: a Map from id to artifact (with its data)
  // of those the session holds, empty when it does not exist. One
  // artifactsByID call, more only past its id or reply size limits.
  async _getMany(threadId, ids) {
    const sid = this.sessionId(threadId);
    const out = new Map();
    let rest = [...new Set(ids)];
    if (this._byIdMissing) return this._getEach(threadId, rest);
    try {
      while (rest.length) {
        const r = await this.client.artifactsByID(sid, rest.slice(0, MAX_IDS));
        for (const a of r.artifacts) out.set(a.id, a);
        rest = rest.slice(r.next);
      }
    } catch (err) {
      if (err.code === 'not_found') return new Map();
      if (err.code !== 'method_not_found') throw err;
      // A daemon older than artifactsByID: one read per id, as before.
      this._byIdMissing = true;
      return this._getEach(threadId, rest);
    }
    return out;
  }

  // _getMany one artifact call per id (at once), for a daemon that lacks
  // artifactsByID.
  async _getEach(threadId, ids) {
    const got = await Promise.all(ids.map((id) => this._get(threadId, id)));
    const out = new Map();
    got.forEach((r, i) => r && out.set(ids[i], r.artifact));
    return out;
  }

  _rememberBlobIds(cpKey, ids) {
    this._blobIds.delete(cpKey);
    this._blobIds.set(cpKey, ids);
    if (this._blobIds.size > BLOB_IDS_CACHED) this._blobIds.delete(this._blobIds.keys().next().value);
  }

  // Saves a delta of artifacts to a thread's session; with
  // expectGeneration, only on that generation (else ConflictError). A
  // missing session is created (expecting generation 0, so a racing
  // creator is not overwritten).
  async _save(threadId, { put = [], append = [], messages = [] }, expectGeneration) {
    const sid = this.sessionId(threadId);
    const change = { put_artifacts: put, append_artifacts: append };
    if (messages.length) change.append_messages = messages;
    try {
      await this.client.save(sid, { change, expectGeneration });
      return;
    } catch (err) {
      if (err.code !== 'not_found') throw err;
    }
    await this.client.save(sid, { snapshot: { messages, artifacts: [...put, ...append] }, expectGeneration: 0 });
  }

  // Messages [start, end) of a thread's session, following `next` when a
  // page comes back short.
  async _messages(sid, start, end) {
    const out = [];
    while (start < end) {
      const p = await this.client.messages(sid, { from: start, to: end });
      out.push(...p.messages);
      if (p.next <= start) break;
      start = p.next;
    }
    return out;
  }

  // The log entries of one namespace, newest id first: the log is read
  // backwards from its tail, and an entry is emitted once the prev_max of
  // the earliest entry read proves nothing earlier sorts before it. A
  // checkpoint put again (a retried put) has an entry per put: the newest
  // stands for it, as MemorySaver's and SqliteSaver's put replaces.
  async *_logEntries(thread, ns) {
    const sid = this.sessionId(thread);
    let first;
    try {
      first = await this.client.messages(sid, { tail: LOG_PAGE });
    } catch (err) {
      if (err.code === 'not_found') return;
      throw err;
    }
    let from = first.from;
    let page = first.more ? [...first.messages, ...(await this._messages(sid, first.next, first.total))] : first.messages;
    const pending = []; // read, not yet emitted, newest id first
    const seen = new Set();
    for (;;) {
      for (let i = page.length - 1; i >= 0; i--) {
        const e = page[i];
        if (!e || e.langgraph !== 'checkpoint' || e.ns !== ns || seen.has(e.id)) continue;
        seen.add(e.id);
        let at = 0;
        while (at < pending.length && pending[at].id > e.id) at++;
        pending.splice(at, 0, e);
        while (pending.length && (e.prev_max === null || e.prev_max === undefined || pending[0].id > e.prev_max)) {
          yield pending.shift();
        }
      }
      if (from <= 0) break;
      const start = Math.max(0, from - LOG_PAGE);
      page = await this._messages(sid, start, from);
      from = start;
    }
    while (pending.length) yield pending.shift();
  }

  // The stored write records of one checkpoint and the read, or [] and null.
  async _writeRecords(threadId, ns, checkpointId) {
    const r = await this._get(threadId, writesKey(ns, checkpointId));
    if (!r) return { records: [], read: null };
    return { records: JSON.parse(Buffer.from(r.artifact.data || '', 'base64').toString('utf8')), read: r };
  }

  // The pending writes of one checkpoint, in writesSortKey order; from
  // `got` (a _getMany answer that asked for them) when given.
  async _loadWrites(threadId, ns, checkpointId, channelFilter, got) {
    let records;
    if (got) {
      const w = got.get(writesKey(ns, checkpointId));
      records = w ? JSON.parse(Buffer.from(w.data || '', 'base64').toString('utf8')) : [];
    } else {
      ({ records } = await this._writeRecords(threadId, ns, checkpointId));
    }
    const key = (w) => writesSortKey(w.task_path || '', w.task_id, w.idx);
    const chosen = channelFilter ? records.filter(channelFilter) : records.slice();
    chosen.sort((x, y) => compareWritesSortKeys(key(x), key(y)));
    return Promise.all(chosen.map(async (w) => [w.task_id, w.channel, await this.serde.loadsTyped(w.type, unb64(w.value))]));
  }

  // The checkpoint an artifact holds, its channel_values filled in from
  // the blobs its channel_versions name: those `got` lacks (all, without
  // it) in one read.
  async _checkpointOf(threadId, artifact, got) {
    const { ns, type } = artifact.metadata;
    const checkpoint = await this.serde.loadsTyped(type, splitData(artifact.data).checkpoint);
    const keys = Object.entries(checkpoint.channel_versions || {}).map(([ch, ver]) => [ch, blobKey(ns, ch, ver)]);
    this._rememberBlobIds(`${this.sessionId(threadId)}\0${artifact.id}`, keys.map(([, k]) => k));
    const have = got || new Map();
    const missing = keys.filter(([, k]) => !have.has(k)).map(([, k]) => k);
    const more = missing.length ? await this._getMany(threadId, missing) : have;
    const values = {};
    await Promise.all(
      keys.map(async ([ch, k]) => {
        const b = have.get(k) || more.get(k);
        if (b) values[ch] = await this.serde.loadsTyped(b.metadata.type, unb64(b.data));
      })
    );
    checkpoint.channel_values = values;
    return checkpoint;
  }

  // The tuple of a checkpoint artifact (with its data); its writes and
  // blobs from `got` when given (see _getMany).
  async _tuple(threadId, artifact, metadata, got) {
    const { ns, id, parent, meta_type: metaType } = artifact.metadata;
    const [checkpoint, pendingWrites, meta2] = await Promise.all([
      this._checkpointOf(threadId, artifact, got),
      this._loadWrites(threadId, ns, id, undefined, got),
      metadata === undefined ? this.serde.loadsTyped(metaType || 'json', splitData(artifact.data).meta) : metadata,
    ]);
    if (checkpoint.v < 4 && parent) await this._migratePendingSends(checkpoint, threadId, ns, parent);
    const tuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } },
      checkpoint,
      metadata: meta2,
      pendingWrites,
    };
    if (parent) tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: parent } };
    return tuple;
  }

  // Checkpoints before format 4 kept pending sends as the parent's TASKS
  // writes; newer LangGraph expects them in channel_values.
  async _migratePendingSends(checkpoint, threadId, ns, parent) {
    const sends = await this._loadWrites(threadId, ns, parent, (w) => w.channel === TASKS);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends.map((w) => w[2]);
    checkpoint.channel_versions ??= {};
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.getNextVersion(undefined);
  }

  // The id of a namespace's latest checkpoint, or undefined.
  async _latestId(threadId, ns) {
    const r = await this._get(threadId, latestKey(ns));
    return r ? r.artifact.metadata.checkpoint_id : undefined;
  }

  async getTuple(config) {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) return undefined;
    const thread = String(threadId);
    const ns = config.configurable?.checkpoint_ns ?? '';
    const wanted = getCheckpointId(config);
    // One read for the pointer (unless a checkpoint is named), the
    // checkpoint, its writes and its blobs, when the checkpoint is the one
    // guessed: named, or the latest this saver put or read.
    const latestAt = `${this.sessionId(thread)}\0${ns}`;
    const guess = wanted || this._latest.get(latestAt);
    const ids = [];
    if (guess) {
      const ck = checkpointKey(ns, guess);
      ids.push(ck, writesKey(ns, guess), ...(this._blobIds.get(`${this.sessionId(thread)}\0${ck}`) || []));
    }
    if (!wanted) ids.push(latestKey(ns));
    let got = await this._getMany(thread, ids);
    let id = wanted;
    if (!wanted) {
      const l = got.get(latestKey(ns));
      if (!l) return undefined;
      id = l.metadata.checkpoint_id;
      this._latest.set(latestAt, id);
      if (id !== guess) got = await this._getMany(thread, [checkpointKey(ns, id), writesKey(ns, id)]);
    }
    const cp = got.get(checkpointKey(ns, id));
    if (!cp) return undefined;
    const tuple = await this._tuple(thread, cp, undefined, got);
    if (wanted) tuple.config = config;
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
      let namespaces;
      if (wantNs !== undefined) {
        namespaces = [wantNs];
      } else {
        const r = await this._get(thread, NAMESPACES_ID);
        namespaces = r ? JSON.parse(Buffer.from(r.artifact.data || '', 'base64').toString('utf8')).sort() : [];
      }
      for (const ns of namespaces) {
        // The tuples of a batch of entries are read at once: the calls
        // overlap in cairn instead of waiting on each other.
        let batch = [];
        const flush = async function* (self) {
          const got = await self._getMany(
            thread,
            batch.flatMap(([e]) => [checkpointKey(ns, e.id), writesKey(ns, e.id)])
          );
          const tuples = await Promise.all(
            batch.map(async ([e, metadata]) => {
              const cp = got.get(checkpointKey(ns, e.id));
              return cp ? self._tuple(thread, cp, metadata, got) : null;
            })
          );
          batch = [];
          for (const t of tuples) if (t) yield t;
        };
        for await (const e of this._logEntries(thread, ns)) {
          if (wantId && e.id !== wantId) continue;
          if (beforeId && e.id >= beforeId) continue;
          const metadata = await this.serde.loadsTyped(e.meta_type || 'json', unb64(e.meta));
          if (filter && !Object.entries(filter).every(([k, v]) => metadata[k] === v)) continue;
          if (limit !== undefined) {
            if (limit <= 0) break;
            limit -= 1;
          }
          batch.push([e, metadata]);
          if (batch.length >= LIST_BATCH || limit === 0) yield* flush(this);
        }
        yield* flush(this);
        if (limit !== undefined && limit <= 0) return;
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
          const [type, data] = await this.serde.dumpsTyped(values[ch]);
          return { id: blobKey(ns, ch, ver), kind: KIND_BLOB, data: b64(data), metadata: { ns, channel: ch, version: String(ver), type } };
        })
    );
    const [[type, data], [metaType, meta]] = await Promise.all([
      this.serde.dumpsTyped(prepared),
      this.serde.dumpsTyped(metadata),
    ]);
    const id = checkpoint.id;
    const parent = config.configurable?.checkpoint_id || null;
    const cp = {
      id: checkpointKey(ns, id),
      kind: KIND_CHECKPOINT,
      data: joinData(meta, data),
      metadata: { ns, id, parent, type, meta_type: metaType },
    };
    const latest = { id: latestKey(ns), kind: KIND_LATEST, metadata: { ns, checkpoint_id: id } };
    const blobIds = Object.entries(prepared.channel_versions || {}).map(([ch, ver]) => blobKey(ns, ch, ver));
    const entry = { langgraph: 'checkpoint', ns, id, parent, meta: b64(meta), meta_type: metaType };
    const thread = String(threadId);
    let moved = false;
    await this._serial(thread, async () => {
      moved = false;
      const cur = await this._get(thread, latestKey(ns));
      if (!cur) {
        moved = true;
        // The namespace's first checkpoint: register the namespace. The
        // pointer is appended, so a racing first put conflicts.
        const reg = await this._get(thread, NAMESPACES_ID);
        const names = reg ? JSON.parse(Buffer.from(reg.artifact.data || '', 'base64').toString('utf8')) : [];
        if (!names.includes(ns)) names.push(ns);
        const nsArt = { id: NAMESPACES_ID, kind: KIND_NAMESPACES, data: Buffer.from(JSON.stringify(names)).toString('base64') };
        const messages = [{ ...entry, prev_max: null }];
        if (!reg) return this._save(thread, { put: [...blobs, cp], append: [latest, nsArt], messages });
        return this._save(thread, { put: [...blobs, cp, nsArt], append: [latest], messages }, reg.generation);
      }
      // On the generation read, so prev_max bounds every earlier entry.
      // The pointer only moves forward: a put of an older checkpoint (a
      // replayed one, or another writer's) leaves it.
      const prevMax = cur.artifact.metadata.checkpoint_id;
      const messages = [{ ...entry, prev_max: prevMax }];
      if (prevMax >= id) return this._save(thread, { put: [...blobs, cp], messages }, cur.generation);
      moved = true;
      return this._save(thread, { put: [...blobs, cp, latest], messages }, cur.generation);
    });
    this._rememberBlobIds(`${this.sessionId(thread)}\0${cp.id}`, blobIds);
    if (moved) this._latest.set(`${this.sessionId(thread)}\0${ns}`, id);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } };
  }

  async putWrites(config, writes, taskId, taskPath) {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) throw missingThread('put writes');
    const ns = config.configurable?.checkpoint_ns ?? '';
    const checkpointId = config.configurable?.checkpoint_id;
    if (checkpointId === undefined) {
      throw new Error('Failed to put writes. The passed RunnableConfig is missing a required "checkpoint_id" field in its "configurable" property.');
    }
    const incoming = await Promise.all(
      writes.map(async ([channel, value], i) => {
        const [type, data] = await this.serde.dumpsTyped(value);
        return { task_id: taskId, task_path: taskPath ?? '', idx: WRITES_IDX_MAP[channel] || i, channel, type, value: b64(data) };
      })
    );
    const thread = String(threadId);
    await this._serial(thread, async () => {
      const { records, read } = await this._writeRecords(thread, ns, checkpointId);
      let changed = false;
      for (const w of incoming) {
        const at = records.findIndex((r) => r.task_id === w.task_id && r.idx === w.idx);
        // Special channels (negative idx) replace what was there; ordinary
        // writes are kept once, as LangGraph retries a task's writes.
        if (at < 0) records.push(w);
        else if (w.idx < 0) records[at] = w;
        else continue;
        changed = true;
      }
      if (!changed) return;
      const art = {
        id: writesKey(ns, checkpointId),
        kind: KIND_WRITES,
        data: Buffer.from(JSON.stringify(records)).toString('base64'),
        metadata: { ns, checkpoint_id: checkpointId },
      };
      // A new list is appended (conflict if another writer made one
      // meanwhile); a grown one replaces the list read, on its generation.
      if (!read) return this._save(thread, { append: [art] });
      return this._save(thread, { put: [art] }, read.generation);
    });
  }

  async deleteThread(threadId) {
    try {
      await this.client.delete(this.sessionId(threadId));
    } catch (err) {
      if (err.code !== 'not_found') throw err;
    }
  }

  /**
   * Walks the parent chain once for all requested channels, reading one
   * checkpoint and its writes per step (see
   * BaseCheckpointSaver.getDeltaChannelHistory).
   */
  async getDeltaChannelHistory({ config, channels }) {
    if (channels.length === 0) return {};
    const threadId = config.configurable?.thread_id;
    const collected = {};
    const seed = {};
    for (const ch of channels) collected[ch] = [];
    if (threadId !== undefined && threadId !== null) {
      const thread = String(threadId);
      const ns = config.configurable?.checkpoint_ns ?? '';
      const startId = getCheckpointId(config) || (await this._latestId(thread, ns));
      const start = startId ? await this._get(thread, checkpointKey(ns, startId)) : null;
      const remaining = new Set(channels);
      let current = start?.artifact.metadata.parent;
      while (current && remaining.size > 0) {
        const r = await this._get(thread, checkpointKey(ns, current));
        if (!r) break;
        const ckpt = await this._checkpointOf(thread, r.artifact);
        const here = new Map();
        for (const ch of remaining) {
          if (Object.prototype.hasOwnProperty.call(ckpt.channel_values, ch) && ckpt.channel_values[ch] !== undefined) {
            here.set(ch, ckpt.channel_values[ch]);
          }
        }
        const loaded = await this._loadWrites(thread, ns, current, (w) => remaining.has(w.channel));
        for (let i = loaded.length - 1; i >= 0; i -= 1) collected[loaded[i][1]].push(loaded[i]);
        for (const [ch, v] of here) {
          seed[ch] = v;
          remaining.delete(ch);
        }
        current = r.artifact.metadata.parent;
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

module.exports = { CairnSaver, KIND_CHECKPOINT, KIND_WRITES, KIND_BLOB, KIND_LATEST, KIND_NAMESPACES };
