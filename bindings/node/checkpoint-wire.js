'use strict';
// The binding's own wire client for daemon-mode Client.checkpoint.
//
// A checkpoint is the call an agent makes every turn. Through libcairn it
// goes cairn_submit -> a Go-owned thread -> the Go client's goroutines ->
// the completion pipe, which costs about 80-150 us more CPU per call than
// speaking the protocol directly; so a daemon-mode Client speaks the wire
// protocol (protocol/PROTOCOL.md) itself for that one method, on a
// connection of its own to the workspace's cairnd: a WebSocket over the
// Unix socket, one CBOR request, one CBOR answer. Everything else keeps
// going through libcairn. This is the JavaScript port of the Python
// binding's cairn/_wire.py, on the event loop: nothing here blocks it.
//
// The path only ever takes a call it can make exactly as libcairn would:
//
// - the request is the bytes libcairn's Go client sends for the JSON text
//   the lib path makes of the same arguments (JSON.stringify, decoded by
//   Go, re-encoded by protocol.AppendCheckpointParams), so the daemon
//   cannot tell the two apart. Arguments whose JSON Go would decode
//   differently or refuse (a turn or count that is not a safe integer, an
//   unknown usage key, a non-finite cost, a lone surrogate in an id,
//   undefined or a function as a message, a toJSON method where the key it
//   is called with would differ, a BigInt, a circular value, a request near
//   the message size limit) go through libcairn, which decides and words
//   the error as before (JSON.stringify's own TypeError is thrown
//   synchronously, as before);
// - when no connection can be had (no daemon, a daemon on its way out, a
//   503), or a write fails before the whole frame left, the call goes
//   through libcairn, which auto-starts cairnd and reports errors as
//   before; after a failed dial the path leaves calls to libcairn for
//   RETRY_GAP_MS before dialing again;
// - a daemon's error answer rejects with the class, code and message
//   libcairn gives for it; a connection lost once the whole request was
//   sent rejects with UnavailableError "protocol: connection lost: ..."
//   (the outcome is unknown, PROTOCOL.md section 10), as libcairn does,
//   and the connection is dropped: the next call dials again;
// - each checkpoint is bounded, from the start of its send to its answer,
//   by the client's callTimeoutMs (libcairn's call_timeout_ms; then from
//   its dial on, as libcairn dials under the call's deadline, though a
//   dial that fails otherwise than by the bound passing still leaves the
//   call to libcairn), else by ANSWER_TIMEOUT_MS (libcairn's default).
//   callTimeoutMs 0 means no bound, as it does for libcairn: the write and
//   the answer are waited for as long as the daemon takes (a dial, as
//   without callTimeoutMs, that takes CONNECT_TIMEOUT_MS leaves the call
//   to libcairn). When the bound passes, the connection is destroyed and
//   the call rejects with UnavailableError "protocol: no answer to
//   checkpoint from cairnd within <bound>: the outcome is unknown ...",
//   as libcairn words it; it never goes to libcairn then, even unsent (a
//   stopped daemon that does not read it would hold libcairn as long
//   again);
// - a second checkpoint while one is in flight on the connection (or
//   while it is being dialed), and a closed Client: libcairn.
//
// The socket is ref()'d only while a call waits on it, like the
// completion pipe, so an idle client does not keep the process alive.
// What arrives while it is idle is read as it comes: a ping is answered
// with a pong; a close frame, EOF or an error marks the connection dead,
// so the next call dials again instead of sending on it.
//
// CAIRN_NODE_WIRE=0 (or false, no, off) in the environment when a client
// is made turns the path off for that client.

const crypto = require('crypto');
const fs = require('fs');
const net = require('net');
const path = require('path');
const { performance } = require('perf_hooks');

/** The environment variable that turns the path off ("0"). */
const ENV = 'CAIRN_NODE_WIRE';

// MAX_SOCKET_PATH is sun_path's 108 bytes less the NUL (PROTOCOL.md §1).
const MAX_SOCKET_PATH = 107;

// DEFAULT_MAX_MESSAGE is the Go client's default message size limit; a
// daemon's hello may lower it.
const DEFAULT_MAX_MESSAGE = 64 * 1024 * 1024;

// SIZE_SLACK keeps requests this close to the limit for libcairn: its
// request ids are not ours, so its message may be a few bytes longer or
// shorter, and it alone decides (and words) too_large at the boundary.
const SIZE_SLACK = 64;

// CONNECT_TIMEOUT_MS bounds dialing, the upgrade and hello; a daemon that
// is slower than that is left to libcairn (which waits up to 15 s).
const CONNECT_TIMEOUT_MS = 5000;
// ANSWER_TIMEOUT_MS bounds a checkpoint, its request's write included,
// when the client has no callTimeoutMs: it is libcairn's default
// call_timeout_ms (5 minutes), long enough that only a stopped or hung
// daemon (one that neither answers nor reads) reaches it, turning it into
// UnavailableError (outcome unknown), never an early failure of a slow
// commit.
const ANSWER_TIMEOUT_MS = 300000;
// defaults.answerTimeoutMs is the bound a Wire made from then on takes
// without callTimeoutMs: ANSWER_TIMEOUT_MS, in an object so that a test can
// shorten it (as libcairn's tests shorten its defaultCallTimeout).
const defaults = { answerTimeoutMs: ANSWER_TIMEOUT_MS };
// RETRY_GAP_MS is how long after a failed dial the path leaves calls to
// libcairn before dialing again, so a daemon that refuses (503) is not
// asked once a turn.
const RETRY_GAP_MS = 250;

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const VERSION = require('./package.json').version;

/** Whether env allows the path (CAIRN_NODE_WIRE is not 0, false, no or off). */
function enabled(env = process.env) {
  const v = String(env[ENV] || '').trim().toLowerCase();
  return !(v === '0' || v === 'false' || v === 'no' || v === 'off');
}

/**
 * The socket a client of workspace dials (PROTOCOL.md §1): the path in
 * .cairn/cairnd.addr when that file exists, else .cairn/cairnd.sock.
 * Resolves to null when neither can serve: a default path too long for
 * sun_path without an addr file means no daemon runs (one would have
 * written the file), and an unreadable or malformed addr file is
 * libcairn's to report.
 */
async function socketPath(workspace) {
  let ws;
  try {
    ws = await fs.promises.realpath(workspace);
  } catch (_) {
    return null;
  }
  const d = path.join(ws, '.cairn');
  let raw;
  try {
    const fh = await fs.promises.open(path.join(d, 'cairnd.addr'), 'r');
    try {
      const b = Buffer.alloc(4096);
      const { bytesRead } = await fh.read(b, 0, b.length, 0);
      raw = b.subarray(0, bytesRead);
    } finally {
      await fh.close();
    }
  } catch (err) {
    if (err && err.code === 'ENOENT') {
      const p = path.join(d, 'cairnd.sock');
      return Buffer.byteLength(p) <= MAX_SOCKET_PATH ? p : null;
    }
    return null;
  }
  let p;
  try {
    p = new TextDecoder('utf-8', { fatal: true }).decode(raw).trim();
  } catch (_) {
    return null;
  }
  if (!path.isAbsolute(p) || p.includes('\0') || Buffer.byteLength(p) > MAX_SOCKET_PATH) return null;
  return p;
}

// -- CBOR (RFC 8949), the little the checkpoint needs -----------------------

/** The length of the shortest head of argument n (as the Go encoder writes it). */
function headLen(n) {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x100000000 ? 5 : 9;
}

/** Writes the shortest head of major type major, argument n (< 2^53), at b[o]; returns the end. */
function putHead(b, o, major, n) {
  const m = major << 5;
  if (n < 24) {
    b[o] = m | n;
    return o + 1;
  }
  if (n < 0x100) {
    b[o] = m | 24;
    b[o + 1] = n;
    return o + 2;
  }
  if (n < 0x10000) {
    b[o] = m | 25;
    b[o + 1] = n >>> 8;
    b[o + 2] = n & 0xff;
    return o + 3;
  }
  if (n < 0x100000000) {
    b[o] = m | 26;
    b.writeUInt32BE(n, o + 1);
    return o + 5;
  }
  b[o] = m | 27;
  b.writeUInt32BE(Math.floor(n / 0x100000000), o + 1);
  b.writeUInt32BE(n >>> 0, o + 5);
  return o + 9;
}

function intLen(n) {
  return headLen(n < 0 ? -1 - n : n);
}

function putInt(b, o, n) {
  return n < 0 ? putHead(b, o, 1, -1 - n) : putHead(b, o, 0, n);
}

function text(s) {
  const t = Buffer.from(s, 'utf8');
  const h = Buffer.alloc(headLen(t.length));
  putHead(h, 0, 3, t.length);
  return Buffer.concat([h, t]);
}

function cat(...parts) {
  return Buffer.concat(parts.map((p) => (typeof p === 'number' ? Buffer.from([p]) : p)));
}

const K_RUN_ID = text('run_id');
const K_SESSION_ID = text('session_id');
const K_TURN = text('turn');
const K_NEW_MESSAGES = text('new_messages');
const K_USAGE = cat(text('usage'), 0xa4); // and a map of 4
const K_INPUT = text('input_tokens');
const K_OUTPUT = text('output_tokens');
const K_TOTAL = text('total_tokens');
const K_COST = cat(text('cost'), 0xfb); // and a float64
const K_TOOL_CALLS = text('tool_calls_count');
const K_STATE = text('state');
const REQ_HEAD = cat(0xa3, text('id'));
// A request's "method" key, its name and the "params" key, in the order
// both clients write a request.
const REQ_HELLO = cat(text('method'), text('hello'), text('params'));
const REQ_CHECKPOINT = cat(text('method'), text('checkpoint'), text('params'));
const HELLO_PARAMS = cat(0xa2, text('protocol_version'), 0x01, text('client'), text(`cairn-node ${VERSION}`));

// A surrogate the u flag does not pair: a lone one (Go would decode its
// JSON escape to U+FFFD).
const LONE_SURROGATE = /\p{Surrogate}/u;

function isSafeInt(v) {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

function hasToJSON(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'bigint') && typeof v.toJSON === 'function';
}

/**
 * What a checkpoint's params are made of, as libcairn's Go client encodes
 * them (protocol.AppendCheckpointParams) after decoding the JSON text the
 * lib path (Client.checkpoint: JSON.stringify of {run_id, turn,
 * new_messages, usage, tool_calls_count, state?, session_id?}) hands it:
 * {rid, sid, turn, msgs, ui, uo, ut, cost, tc, st}, the messages and the
 * state as their JSON text (which Go keeps byte for byte). null when the
 * arguments are not ones it can encode exactly so (see the header). May
 * throw what JSON.stringify throws (a BigInt, a circular value): the
 * caller then goes through libcairn, which throws it again.
 */
function encodeCheckpoint(runId, turn, newMessages, usage, toolCallsCount, state, sessionId) {
  if (typeof runId !== 'string' || LONE_SURROGATE.test(runId)) return null;
  if (!isSafeInt(turn) || !isSafeInt(toolCallsCount)) return null;
  let sid = '';
  if (sessionId) {
    // The lib path sends a truthy session id as it is.
    if (typeof sessionId !== 'string' || LONE_SURROGATE.test(sessionId)) return null;
    sid = sessionId;
  }
  // new_messages: JSON.stringify writes each element as it writes it on
  // its own, except that it calls a toJSON method with the index as the key
  // (here: ''), and writes undefined, a function or a symbol as null
  // (here: nothing).
  if (!Array.isArray(newMessages) || hasToJSON(newMessages)) return null;
  const n = newMessages.length;
  const msgs = new Array(n);
  for (let i = 0; i < n; i++) {
    const m = newMessages[i];
    if (hasToJSON(m) || typeof m === 'bigint') return null;
    const s = JSON.stringify(m);
    if (typeof s !== 'string') return null;
    msgs[i] = s;
  }
  // usage: an object of the four keys, as Go's session.Usage decodes it
  // (an unknown key, a null, a fraction: libcairn decides). A key whose
  // value is undefined is one JSON.stringify leaves out.
  let ui = 0;
  let uo = 0;
  let ut = 0;
  let cost = 0;
  if (usage === null || typeof usage !== 'object' || Array.isArray(usage) || hasToJSON(usage)) return null;
  for (const k of Object.keys(usage)) {
    const v = usage[k];
    if (v === undefined) continue;
    switch (k) {
      case 'input_tokens':
        if (!isSafeInt(v)) return null;
        ui = v;
        break;
      case 'output_tokens':
        if (!isSafeInt(v)) return null;
        uo = v;
        break;
      case 'total_tokens':
        if (!isSafeInt(v)) return null;
        ut = v;
        break;
      case 'cost':
        if (typeof v !== 'number' || !Number.isFinite(v)) return null;
        // JSON.stringify writes the shortest text that reads back as v,
        // which Go parses to v's own bits; -0 it writes as 0.
        cost = v === 0 ? 0 : v;
        break;
      default:
        return null;
    }
  }
  // state: its JSON text, whatever it is (null and "" included: Go keeps
  // any JSON value's bytes); undefined means no state.
  let st = null;
  if (state !== undefined) {
    if (hasToJSON(state) || typeof state === 'bigint') return null;
    st = JSON.stringify(state);
    if (typeof st !== 'string') return null;
  }
  return { rid: runId, sid, turn, msgs, ui, uo, ut, cost, tc: toolCallsCount, st };
}

/**
 * The CBOR of a checkpoint request {id, method, params} with the params
 * enc describes (encodeCheckpoint), written into b from offset o; the
 * caller made room (checkpointSize).
 */
function putCheckpoint(b, o, id, enc, lens) {
  o += REQ_HEAD.copy(b, o);
  o = putHead(b, o, 0, id);
  o += REQ_CHECKPOINT.copy(b, o);
  o = putHead(b, o, 5, 5 + (enc.sid ? 1 : 0) + (enc.st !== null ? 1 : 0));
  o += K_RUN_ID.copy(b, o);
  o = putHead(b, o, 3, lens.rid);
  o += b.utf8Write(enc.rid, o);
  if (enc.sid) {
    o += K_SESSION_ID.copy(b, o);
    o = putHead(b, o, 3, lens.sid);
    o += b.utf8Write(enc.sid, o);
  }
  o += K_TURN.copy(b, o);
  o = putInt(b, o, enc.turn);
  o += K_NEW_MESSAGES.copy(b, o);
  const msgs = enc.msgs;
  o = putHead(b, o, 4, msgs.length);
  for (let i = 0; i < msgs.length; i++) {
    o = putHead(b, o, 2, lens.msgs[i]);
    o += b.utf8Write(msgs[i], o);
  }
  o += K_USAGE.copy(b, o);
  o += K_INPUT.copy(b, o);
  o = putInt(b, o, enc.ui);
  o += K_OUTPUT.copy(b, o);
  o = putInt(b, o, enc.uo);
  o += K_TOTAL.copy(b, o);
  o = putInt(b, o, enc.ut);
  o += K_COST.copy(b, o);
  b.writeDoubleBE(enc.cost, o);
  o += 8;
  o += K_TOOL_CALLS.copy(b, o);
  o = putInt(b, o, enc.tc);
  if (enc.st !== null) {
    o += K_STATE.copy(b, o);
    o = putHead(b, o, 2, lens.st);
    o += b.utf8Write(enc.st, o);
  }
  return o;
}

/** The byte length of putCheckpoint's output, and the UTF-8 lengths it needs. */
function checkpointSize(id, enc) {
  const lens = { rid: Buffer.byteLength(enc.rid, 'utf8'), sid: 0, msgs: new Array(enc.msgs.length), st: 0 };
  let n = REQ_HEAD.length + headLen(id) + REQ_CHECKPOINT.length + 1;
  n += K_RUN_ID.length + headLen(lens.rid) + lens.rid;
  if (enc.sid) {
    lens.sid = Buffer.byteLength(enc.sid, 'utf8');
    n += K_SESSION_ID.length + headLen(lens.sid) + lens.sid;
  }
  n += K_TURN.length + intLen(enc.turn) + K_NEW_MESSAGES.length + headLen(enc.msgs.length);
  for (let i = 0; i < enc.msgs.length; i++) {
    const m = Buffer.byteLength(enc.msgs[i], 'utf8');
    lens.msgs[i] = m;
    n += headLen(m) + m;
  }
  n += K_USAGE.length + K_INPUT.length + intLen(enc.ui) + K_OUTPUT.length + intLen(enc.uo);
  n += K_TOTAL.length + intLen(enc.ut) + K_COST.length + 8 + K_TOOL_CALLS.length + intLen(enc.tc);
  if (enc.st !== null) {
    lens.st = Buffer.byteLength(enc.st, 'utf8');
    n += K_STATE.length + headLen(lens.st) + lens.st;
  }
  return { n, lens };
}

const utf8 = new TextDecoder('utf-8');

/**
 * A CBOR decoder for what the daemon answers: definite lengths, no tags
 * (PROTOCOL.md §2). Byte strings decode to Buffers, maps to plain objects
 * (keys as strings), integers to Numbers (as JSON.parse gives libcairn's).
 */
class Decoder {
  constructor(b, i = 0) {
    this.b = b;
    this.i = i;
  }

  /** Where the next n bytes start; they are consumed. */
  take(n) {
    const i = this.i;
    if (i + n > this.b.length) throw new Error('truncated');
    this.i = i + n;
    return i;
  }

  arg(info) {
    const b = this.b;
    if (info < 24) return info;
    if (info === 24) return b[this.take(1)];
    if (info === 25) return b.readUInt16BE(this.take(2));
    if (info === 26) return b.readUInt32BE(this.take(4));
    if (info === 27) {
      const i = this.take(8);
      return b.readUInt32BE(i) * 0x100000000 + b.readUInt32BE(i + 4);
    }
    throw new Error('indefinite length or reserved info');
  }

  item(depth = 0) {
    if (depth > 64) throw new Error('nested too deeply');
    const b = this.b;
    const ib = b[this.take(1)];
    const major = ib >> 5;
    const info = ib & 31;
    if (major === 7) {
      if (info === 20) return false;
      if (info === 21) return true;
      if (info === 22 || info === 23) return null;
      if (info === 25) return halfToNumber(b.readUInt16BE(this.take(2)));
      if (info === 26) return b.readFloatBE(this.take(4));
      if (info === 27) return b.readDoubleBE(this.take(8));
      throw new Error('unsupported simple value');
    }
    const n = this.arg(info);
    switch (major) {
      case 0:
        return n;
      case 1:
        return -1 - n;
      case 2:
      case 3: {
        const i = this.take(n);
        return major === 2 ? b.subarray(i, i + n) : utf8.decode(b.subarray(i, i + n));
      }
      case 4: {
        const a = [];
        for (let k = 0; k < n; k++) a.push(this.item(depth + 1));
        return a;
      }
      case 5: {
        const o = Object.create(null);
        for (let k = 0; k < n; k++) {
          const key = this.item(depth + 1);
          o[String(key)] = this.item(depth + 1);
        }
        return o;
      }
      default:
        throw new Error('a tag');
    }
  }
}

function halfToNumber(h) {
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  const s = h & 0x8000 ? -1 : 1;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/** The one CBOR item b holds. */
function decode(b) {
  const d = new Decoder(b);
  const v = d.item();
  if (d.i !== b.length) throw new Error('trailing bytes');
  return v;
}

const ANSWER_ID = cat(0xa2, text('id'));
const ANSWER_RESULT = cat(text('result'), 0xa2, text('generation'));
const ANSWER_COUNT = text('message_count');

/** The unsigned int at b[i] and where it ends; [-1, i] when there is none. */
function uintAt(b, i) {
  if (i >= b.length || b[i] >> 5 !== 0) return [-1, i];
  const d = new Decoder(b, i + 1);
  try {
    return [d.arg(b[i] & 31), d.i];
  } catch (_) {
    return [-1, i];
  }
}

function startsWith(b, prefix, at) {
  if (at + prefix.length > b.length) return false;
  for (let k = 0; k < prefix.length; k++) if (b[at + k] !== prefix[k]) return false;
  return true;
}

/** The id of answer msg, or -1 (a push, an id null, not CBOR). */
function answerId(msg) {
  if (startsWith(msg, ANSWER_ID, 0)) return uintAt(msg, ANSWER_ID.length)[0];
  let ans;
  try {
    ans = decode(msg);
  } catch (_) {
    return -1;
  }
  return ans !== null && typeof ans === 'object' && typeof ans.id === 'number' ? ans.id : -1;
}

/**
 * A connection's failure: sent says whether the whole request had left;
 * late, that the call's bound passed (whatever sent says).
 */
class WireFailure extends Error {
  constructor(reason, sent, late = false) {
    super(reason);
    this.sent = sent;
    this.late = late;
  }
}

/**
 * ms (a whole number of milliseconds) as Go's time.Duration String prints
 * it: 400ms, 1s, 1.5s, 1m0s, 1m30.25s, 1h0m0s.
 */
function goDuration(ms) {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3600000);
  const m = Math.floor(ms / 60000) % 60;
  let s = String(Math.floor(ms / 1000) % 60);
  const frac = ms % 1000;
  if (frac !== 0) s += '.' + String(frac).padStart(3, '0').replace(/0+$/, '');
  if (h !== 0) return `${h}h${m}m${s}s`;
  if (m !== 0) return `${m}m${s}s`;
  return `${s}s`;
}

/** libcairn's message (protocol.NoAnswerError's) for a call to method that got no answer within ms. */
function noAnswerMessage(method, ms) {
  return `protocol: no answer to ${method} from cairnd within ${goDuration(ms)}: the outcome is unknown (a request that reached the daemon may still be carried out)`;
}

// -- the connection --------------------------------------------------------------

// Masking keys (RFC 6455 §5.3: a fresh, unpredictable key per frame), taken
// four bytes at a time from a block of randomness.
const keyBlock = Buffer.alloc(4096);
let keyAt = keyBlock.length;

function maskKey(dst, at) {
  if (keyAt + 4 > keyBlock.length) {
    crypto.randomFillSync(keyBlock);
    keyAt = 0;
  }
  keyBlock.copy(dst, at, keyAt, keyAt + 4);
  keyAt += 4;
}

const key32 = new Uint32Array(1);
const key8 = new Uint8Array(key32.buffer);

/**
 * Masks b[at, at+n) in place with the four key bytes at b[keyAt]. When
 * b's memory at `at` is 4-byte aligned the bulk goes a 32-bit word at a
 * time (the key read as a word in the same byte order, so the XOR is
 * byte for byte).
 */
function mask(b, at, n, kAt) {
  key8[0] = b[kAt];
  key8[1] = b[kAt + 1];
  key8[2] = b[kAt + 2];
  key8[3] = b[kAt + 3];
  let j = 0;
  if ((b.byteOffset + at) % 4 === 0 && n >= 16) {
    const words = n >>> 2;
    const w = new Uint32Array(b.buffer, b.byteOffset + at, words);
    const k = key32[0];
    for (let i = 0; i < words; i++) w[i] ^= k;
    j = words << 2;
  }
  for (; j < n; j++) b[at + j] ^= key8[j & 3];
}

// A frame's header (with its mask key) ends at PAYLOAD_AT in a request
// buffer, so that the payload starts 8-aligned: headers are 6, 8 or 14
// bytes long.
const PAYLOAD_AT = 16;

/** Writes the header of a masked frame (opcode op, payload n bytes) ending at b[end]; returns its start. */
function putFrameHeader(b, end, op, n) {
  let at;
  if (n < 126) {
    at = end - 6;
    b[at + 1] = 0x80 | n;
  } else if (n < 0x10000) {
    at = end - 8;
    b[at + 1] = 0x80 | 126;
    b.writeUInt16BE(n, at + 2);
  } else {
    at = end - 14;
    b[at + 1] = 0x80 | 127;
    b.writeUInt32BE(Math.floor(n / 0x100000000), at + 2);
    b.writeUInt32BE(n >>> 0, at + 6);
  }
  b[at] = 0x80 | op;
  maskKey(b, end - 4);
  return at;
}

/** A whole masked frame of opcode op around payload (a control frame: small). */
function controlFrame(op, payload) {
  const b = Buffer.alloc(PAYLOAD_AT + payload.length);
  payload.copy(b, PAYLOAD_AT);
  const at = putFrameHeader(b, PAYLOAD_AT, op, payload.length);
  mask(b, PAYLOAD_AT, payload.length, PAYLOAD_AT - 4);
  return b.subarray(at);
}

const STATUS = { 1000: 'StatusNormalClosure', 1001: 'StatusGoingAway', 1008: 'StatusPolicyViolation', 1009: 'StatusMessageTooBig', 1011: 'StatusInternalError' };

// How the Go client (coder/websocket) names a close status in its error.
function statusName(code) {
  return STATUS[code] || `StatusCode(${code})`;
}

// Request buffers at most this large are kept for the next call.
const MAX_KEPT = 1 << 20;

/**
 * One WebSocket connection to cairnd, used by one call at a time. Its
 * opened promise settles once the upgrade and hello are done (or failed).
 */
class Conn {
  constructor(socketFile) {
    this.nextId = 1;
    this.maxSize = DEFAULT_MAX_MESSAGE;
    this.dead = null; // why the connection is gone, once it is
    this.upgraded = false;
    this.rbuf = null; // bytes of an incomplete frame (or upgrade answer)
    this.parts = null; // the frames so far of a fragmented message
    this.partsSize = 0;
    this.partsText = false;
    this.waiter = null; // {id, resolve, reject, sent} of the call awaiting its answer
    this.timer = null;
    this.timerMs = 0; // the bound timer was set for
    this.wbuf = Buffer.allocUnsafeSlow(16 * 1024);
    this.key = crypto.randomBytes(16).toString('base64');
    this.sock = net.connect({ path: socketFile });
    this.sock.on('connect', () => this.onConnect());
    this.sock.on('data', (chunk) => this.onData(chunk));
    this.sock.on('end', () => this.fail('failed to get reader: failed to read frame header: EOF'));
    this.sock.on('error', (err) => this.fail(err.message));
    this.sock.on('close', () => this.fail('the connection was closed'));
    this.opened = new Promise((resolve, reject) => {
      this.onOpen = (err) => {
        this.onOpen = null;
        if (err) reject(err);
        else resolve(this);
      };
    });
  }

  onConnect() {
    if (this.dead) return;
    this.sock.write(
      'GET / HTTP/1.1\r\nHost: cairnd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Key: ${this.key}\r\nSec-WebSocket-Version: 13\r\n` +
        'Sec-WebSocket-Protocol: cairn.v1\r\n\r\n'
    );
  }

  /** Checks the upgrade answer at the start of chunk; returns the bytes after it, or null (more to come). */
  upgrade(chunk) {
    const end = chunk.indexOf('\r\n\r\n');
    if (end < 0) {
      if (chunk.length > 65536) throw new Error('upgrade answer headers too long');
      return null;
    }
    const lines = chunk.subarray(0, end).toString('latin1').split('\r\n');
    const status = lines[0].split(' ');
    if (status.length < 2 || status[1] !== '101') throw new Error(`upgrade refused: ${lines[0]}`);
    const h = new Map();
    for (const line of lines.slice(1)) {
      const c = line.indexOf(':');
      if (c < 0) continue;
      h.set(line.slice(0, c).trim().toLowerCase(), line.slice(c + 1).trim());
    }
    const accept = crypto.createHash('sha1').update(this.key + GUID).digest('base64');
    if (
      (h.get('upgrade') || '').toLowerCase() !== 'websocket' ||
      !(h.get('connection') || '').toLowerCase().includes('upgrade') ||
      h.get('sec-websocket-accept') !== accept ||
      h.get('sec-websocket-protocol') !== 'cairn.v1'
    ) {
      throw new Error('bad upgrade answer');
    }
    this.upgraded = true;
    // hello, for the daemon's message size limit.
    const id = this.nextId++;
    this.request(id, (b, o) => {
      o += REQ_HEAD.copy(b, o);
      o = putHead(b, o, 0, id);
      o += REQ_HELLO.copy(b, o);
      return o + HELLO_PARAMS.copy(b, o);
    }, REQ_HEAD.length + headLen(id) + REQ_HELLO.length + HELLO_PARAMS.length).then(
      (msg) => this.hello(msg),
      (err) => this.onOpen && this.onOpen(err)
    );
    return chunk.subarray(end + 4);
  }

  hello(msg) {
    if (!this.onOpen) return;
    let ans;
    try {
      ans = decode(msg);
    } catch (err) {
      this.fail(`hello answer: ${err.message}`);
      return;
    }
    const res = ans && typeof ans === 'object' ? ans.result : undefined;
    if (!res || typeof res !== 'object') {
      this.fail('hello failed');
      return;
    }
    const limits = res.limits;
    if (limits && typeof limits === 'object') {
      const m = limits.max_message_size;
      if (Number.isSafeInteger(m) && m > 0 && m < this.maxSize) this.maxSize = m;
    }
    this.onOpen(null);
  }

  onData(chunk) {
    if (this.dead) return;
    if (this.rbuf !== null) {
      chunk = Buffer.concat([this.rbuf, chunk]);
      this.rbuf = null;
    }
    try {
      if (!this.upgraded) {
        const rest = this.upgrade(chunk);
        if (rest === null) {
          this.rbuf = chunk;
          return;
        }
        chunk = rest;
      }
      let i = 0;
      while (!this.dead) {
        const next = this.frame(chunk, i);
        if (next < 0) break;
        i = next;
      }
      if (!this.dead && i < chunk.length) this.rbuf = chunk.subarray(i);
    } catch (err) {
      this.fail(err.message);
    }
  }

  /** Handles the frame at b[i]; returns where it ends, or -1 when it is not whole yet. */
  frame(b, i) {
    if (b.length - i < 2) return -1;
    const b0 = b[i];
    const b1 = b[i + 1];
    if (b1 & 0x80) throw new Error('the daemon sent a masked frame');
    let n = b1 & 0x7f;
    let at = i + 2;
    if (n === 126) {
      if (b.length - i < 4) return -1;
      n = b.readUInt16BE(i + 2);
      at = i + 4;
    } else if (n === 127) {
      if (b.length - i < 10) return -1;
      n = b.readUInt32BE(i + 2) * 0x100000000 + b.readUInt32BE(i + 6);
      at = i + 10;
    }
    if (n > this.maxSize + 16) throw new Error('a message over the size limit');
    if (b.length - at < n) return -1;
    const payload = b.subarray(at, at + n);
    const op = b0 & 0x0f;
    switch (op) {
      case 8: {
        const code = n >= 2 ? payload.readUInt16BE(0) : 1005;
        const reason = utf8.decode(payload.subarray(2));
        this.fail(`failed to get reader: received close frame: status = ${statusName(code)} and reason = ${JSON.stringify(reason)}`);
        return at + n;
      }
      case 9:
        this.write(controlFrame(10, payload));
        return at + n;
      case 10:
        return at + n;
      case 0:
      case 1:
      case 2:
        break;
      default:
        throw new Error(`a frame with reserved opcode ${op}`);
    }
    if (op !== 0 && this.parts !== null) throw new Error('a new message inside a fragmented one');
    if (op === 0 && this.parts === null) throw new Error('a continuation frame without a message');
    if (b0 & 0x80 && this.parts === null) {
      // The usual case: a whole message in one frame.
      if (op === 2) this.message(payload);
      return at + n;
    }
    if (this.parts === null) {
      this.parts = [];
      this.partsSize = 0;
      this.partsText = op === 1;
    }
    this.parts.push(Buffer.from(payload));
    this.partsSize += n;
    if (this.partsSize > this.maxSize + 16) throw new Error('a message over the size limit');
    if (b0 & 0x80) {
      const parts = this.parts;
      const isText = this.partsText;
      this.parts = null;
      if (!isText) this.message(Buffer.concat(parts));
    }
    return at + n;
  }

  /** A whole binary message: the answer the waiting call wants, or not ours (a push, another id). */
  message(msg) {
    const w = this.waiter;
    if (w === null || answerId(msg) !== w.id) return;
    this.waiter = null;
    w.resolve(msg);
  }

  /**
   * Marks the connection dead (once), failing the waiting call (late: its
   * bound passed), and closes the socket.
   */
  fail(reason, late = false) {
    if (this.dead) return;
    this.dead = reason || 'the connection was closed';
    this.sock.destroy();
    if (this.timer !== null) clearTimeout(this.timer);
    const w = this.waiter;
    if (w !== null) {
      this.waiter = null;
      w.reject(new WireFailure(this.dead, w.sent, late));
    }
    if (this.onOpen) this.onOpen(new Error(this.dead));
  }

  write(frame, cb) {
    if (this.dead) {
      if (cb) cb(new Error(this.dead));
      return;
    }
    this.sock.write(frame, cb);
  }

  /**
   * Sends the request whose CBOR put(b, o) writes (size bytes, id id) and
   * resolves to its answer. Rejects with a WireFailure: sent false when
   * the frame did not leave whole (nothing was processed), true when the
   * connection went after that.
   */
  request(id, put, size) {
    const need = PAYLOAD_AT + size;
    let b = this.wbuf;
    if (b.length < need) {
      b = Buffer.allocUnsafeSlow(Math.max(need, Math.min(2 * b.length, MAX_KEPT)));
      if (b.length <= MAX_KEPT) this.wbuf = b;
    }
    const end = put(b, PAYLOAD_AT);
    if (end !== need) throw new Error(`wire: the request is ${end - PAYLOAD_AT} bytes, not ${size}`);
    const at = putFrameHeader(b, PAYLOAD_AT, 2, size);
    mask(b, PAYLOAD_AT, size, PAYLOAD_AT - 4);
    return new Promise((resolve, reject) => {
      if (this.dead) {
        reject(new WireFailure(this.dead, false));
        return;
      }
      const w = { id, resolve, reject, sent: false };
      this.waiter = w;
      // b may be reused by the next request only once this one is
      // answered, which means it was written: the write holds b until then.
      this.write(b.subarray(at, need), (err) => {
        if (err) this.fail(err.message);
        else w.sent = true;
      });
    });
  }

  /**
   * Sends a checkpoint (enc: encodeCheckpoint's) and resolves to its
   * answer; null (nothing sent) when it is too close to the size limit.
   * Past ms from now, the write and the answer included, the connection
   * fails (a WireFailure with late set); ms 0: never.
   */
  checkpoint(enc, ms) {
    const id = this.nextId;
    const { n, lens } = checkpointSize(id, enc);
    if (n > this.maxSize - SIZE_SLACK) return null;
    this.nextId = id + 1;
    this.sock.ref();
    // No timer at all for no bound (one of 0 ms would fire at once). A
    // connection's calls come from one Wire, so either all of them have a
    // bound or none has: no timer of an earlier call is left to clear.
    if (ms > 0) this.arm(ms);
    return this.request(id, (b, o) => putCheckpoint(b, o, id, enc, lens), n);
  }

  /** Arms the timer that fails the call in flight once ms passed. */
  arm(ms) {
    if (this.timer !== null && this.timerMs === ms) {
      this.timer.refresh();
    } else {
      if (this.timer !== null) clearTimeout(this.timer);
      // One millisecond more: libuv's clock counts truncated whole
      // milliseconds, so a timer of ms may fire up to 1 ms before ms.
      this.timer = setTimeout(() => this.onTimeout(), ms + 1);
      this.timer.unref();
      this.timerMs = ms;
    }
  }

  onTimeout() {
    // The timer stays armed between calls (refresh() is cheaper than a
    // new one): with no call waiting, the connection is fine.
    if (this.waiter !== null) this.fail('no answer in time', true);
  }

  /** Done with a call: an idle connection does not keep the process alive. */
  idle() {
    if (!this.dead) this.sock.unref();
  }

  /**
   * Closes the connection; graceful sends a close frame (1000) first
   * without waiting for the daemon's, as the Go client does on close.
   */
  close(graceful) {
    if (this.dead) return;
    this.dead = 'closed';
    const s = this.sock;
    if (this.timer !== null) clearTimeout(this.timer);
    if (graceful && this.upgraded) {
      s.end(controlFrame(8, Buffer.from([0x03, 0xe8])), () => s.destroy());
      s.unref();
      // A daemon that reads nothing more does not hold the socket open.
      setTimeout(() => s.destroy(), 1000).unref();
    } else {
      s.destroy();
    }
  }
}

/** The result of a checkpoint's answer msg, or the error it rejects with (errorFor(code, message)). */
function checkpointAnswer(msg, errorFor) {
  // The usual answer, as the daemon encodes it (appendSuccess,
  // appendCheckpointResult), read without the general decoder.
  let [, i] = uintAt(msg, ANSWER_ID.length);
  if (startsWith(msg, ANSWER_ID, 0) && startsWith(msg, ANSWER_RESULT, i)) {
    let gen;
    [gen, i] = uintAt(msg, i + ANSWER_RESULT.length);
    if (gen >= 0 && startsWith(msg, ANSWER_COUNT, i)) {
      i += ANSWER_COUNT.length;
      if (i < msg.length && msg[i] >> 5 <= 1) {
        const d = new Decoder(msg, i);
        try {
          const count = d.item();
          if (d.i === msg.length) return { generation: gen, message_count: count };
        } catch (_) {
          // the general decoder decides
        }
      }
    }
  }
  let ans;
  try {
    ans = decode(msg);
  } catch (err) {
    throw new WireFailure(`an answer that is not CBOR: ${err.message}`, true);
  }
  if (ans === null || typeof ans !== 'object' || Array.isArray(ans) || ans instanceof Uint8Array) {
    throw new WireFailure('an answer that is not a map', true);
  }
  const err = ans.error;
  if (err !== null && typeof err === 'object' && !Array.isArray(err)) {
    // As libcairn reports a daemon's error: its code (an unknown one keeps
    // its text, with the base class) and message; data is not passed on.
    const code = String(err.code || '') || 'internal';
    return errorFor(code, typeof err.message === 'string' ? err.message : '');
  }
  const res = ans.result;
  if (res === null || typeof res !== 'object') throw new WireFailure('an answer with neither result nor error', true);
  return { generation: Number(res.generation || 0), message_count: Number(res.message_count || 0) };
}

/**
 * The native checkpoint path of one daemon-mode Client.
 *
 * workspace() resolves to the client's workspace (or null); errorFor(code,
 * message) makes the error libcairn's path gives for a daemon's error
 * answer; lost(message) the UnavailableError of a lost connection.
 */
class Wire {
  constructor({ workspace, errorFor, lost, callTimeoutMs }) {
    this._workspace = workspace;
    this._errorFor = errorFor;
    this._lost = lost;
    // One checkpoint's bound (see the header), 0 for none (callTimeoutMs
    // 0); _boundsDial: it runs from the dial on, not only from the send.
    this._bound = callTimeoutMs === undefined ? defaults.answerTimeoutMs : callTimeoutMs;
    this._boundsDial = callTimeoutMs > 0;
    this._conn = null;
    this._busy = false;
    this._closed = false;
    this._retryAt = 0;
    /** The checkpoints this path sent, or began to send (tests read it). */
    this.sent = 0;
  }

  /** Closes the connection (idempotent); a call in flight closes it when it is done. */
  close() {
    this._closed = true;
    if (!this._busy) this._drop(true);
  }

  _drop(graceful) {
    const c = this._conn;
    this._conn = null;
    if (c !== null) c.close(graceful);
  }

  /**
   * Sends a checkpoint of these arguments (Client.checkpoint's, defaults
   * applied) and returns the Promise of its result; null means nothing
   * was tried: use libcairn. lib() makes the libcairn call, for a call
   * that finds out only later that it cannot go this way (a dial or a
   * write that fails); it is called at most once, never synchronously.
   */
  checkpoint(args, lib) {
    if (this._closed || this._busy || performance.now() < this._retryAt) return null;
    let enc;
    try {
      enc = encodeCheckpoint(...args);
    } catch (_) {
      // JSON.stringify's TypeError (a BigInt, a circular value): the lib
      // path throws it, as before.
      return null;
    }
    if (enc === null) return null;
    let c = this._conn;
    if (c !== null && c.dead) {
      this._drop(false);
      c = null;
    }
    if (c !== null) return this._send(c, enc, lib, this._bound);
    this._busy = true;
    return this._dialThenSend(enc, lib);
  }

  async _dialThenSend(enc, lib) {
    const t0 = performance.now();
    // With a callTimeoutMs other than 0 the dial has the call's bound, and
    // a dial it cuts short ends the call (libcairn would wait as long
    // again); a dial that fails otherwise, or under CONNECT_TIMEOUT_MS
    // (without callTimeoutMs, or with 0), leaves it to libcairn.
    let c = null;
    let late = false;
    try {
      c = await this._dial(this._boundsDial ? this._bound : CONNECT_TIMEOUT_MS);
    } catch (err) {
      late = this._boundsDial && err instanceof WireFailure && err.late;
      this._retryAt = performance.now() + RETRY_GAP_MS;
    }
    this._busy = false;
    if (late) throw this._noAnswer();
    if (c === null || this._closed) {
      if (c !== null) c.close(true);
      return lib();
    }
    this._conn = c;
    let ms = this._bound;
    if (this._boundsDial) ms = Math.max(1, Math.ceil(ms - (performance.now() - t0)));
    const r = this._send(c, enc, lib, ms);
    if (r !== null) return r;
    c.idle();
    return lib();
  }

  /**
   * A new connection, upgraded and past hello; rejects with a late
   * WireFailure once ms passed, the workspace's lookup included.
   */
  async _dial(ms) {
    let c = null;
    let over = false;
    let timer = null;
    const open = (async () => {
      const ws = await this._workspace();
      const p = ws ? await socketPath(ws) : null;
      if (!p || this._closed || over) throw new Error('no socket');
      c = new Conn(p);
      return c.opened;
    })();
    const cut = new Promise((_, reject) => {
      timer = setTimeout(() => {
        over = true;
        reject(new WireFailure(`no connection within ${goDuration(ms)}`, false, true));
      }, ms + 1);
    });
    try {
      return await Promise.race([open, cut]);
    } catch (err) {
      if (c !== null) c.close(false);
      throw err;
    } finally {
      clearTimeout(timer);
      // The loser of the race may still reject: nobody waits for it.
      open.catch(() => {});
    }
  }

  /** The UnavailableError of a checkpoint whose bound passed. */
  _noAnswer() {
    return this._lost(noAnswerMessage('checkpoint', this._bound));
  }

  /**
   * Sends enc on c, bounded by ms; the Promise of its result, or null when
   * it is too large for this path.
   */
  _send(c, enc, lib, ms) {
    let answer;
    try {
      answer = c.checkpoint(enc, ms);
    } catch (_) {
      // A request this path failed to make (a bug): nothing was sent, and
      // the connection's state is unknown.
      this._drop(false);
      return null;
    }
    if (answer === null) return null;
    this._busy = true;
    return answer.then(
      (msg) => {
        this.sent++;
        this._done(c);
        let r;
        try {
          r = checkpointAnswer(msg, this._errorFor);
        } catch (err) {
          this._drop(false);
          throw this._lost(`protocol: connection lost: ${err.message}`);
        }
        if (r instanceof Error) throw r;
        return r;
      },
      (err) => {
        this._done(c);
        if (this._conn === c) this._drop(false);
        if (err.late) {
          this.sent++;
          throw this._noAnswer();
        }
        if (!err.sent) return lib(); // nothing was processed
        this.sent++;
        throw this._lost(`protocol: connection lost: ${err.message}`);
      }
    );
  }

  _done(c) {
    this._busy = false;
    c.idle();
    if (this._closed) this._drop(true);
  }
}

module.exports = {
  ENV,
  RETRY_GAP_MS,
  defaults,
  enabled,
  socketPath,
  encodeCheckpoint,
  checkpointSize,
  decode,
  goDuration,
  noAnswerMessage,
  Wire,
};
