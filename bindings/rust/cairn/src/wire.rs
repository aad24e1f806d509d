//! The binding's own wire client for daemon-mode [`Client::checkpoint`].
//!
//! A checkpoint is the call an agent makes every turn. Through libcairn it
//! crosses the FFI, cgo and the Go client's goroutines, which cost more CPU
//! than the rest of the call; so a daemon-mode Client speaks the wire
//! protocol (`protocol/PROTOCOL.md`) itself for that one method, on a
//! connection of its own to the workspace's cairnd: a WebSocket over the
//! Unix socket, one CBOR request, one CBOR answer. Everything else keeps
//! going through libcairn. This is the Rust port of the Python binding's
//! `cairn/_wire.py` (and of the Node.js binding's `checkpoint-wire.js`).
//!
//! The path only ever takes a call it can make exactly as libcairn would:
//!
//! - the request is the bytes libcairn's Go client sends for the JSON the
//!   lib path makes of the same [`CheckpointRequest`] (serde_json, decoded
//!   by Go, re-encoded by `protocol.AppendCheckpointParams`), so the
//!   daemon cannot tell the two apart. A request Go would decode
//!   differently (a non-finite cost, which serde_json writes as `null`) or
//!   one near the message size limit goes through libcairn, which decides
//!   and words the error as before;
//! - when no connection can be had (no daemon, a daemon on its way out, a
//!   503, a listen backlog full), or a send fails before the whole frame
//!   left, the call goes
//!   through libcairn, which auto-starts cairnd and reports errors as
//!   before; after a failed dial the path leaves calls to libcairn for
//!   [`RETRY_GAP`] before dialing again;
//! - a daemon's error answer returns the [`Error`] (code and message)
//!   libcairn returns for it; a connection lost once the whole request was
//!   sent returns `unavailable` "protocol: connection lost: ..." (the
//!   outcome is unknown, PROTOCOL.md section 10), as libcairn does, and
//!   the connection is dropped: the next call dials again;
//! - with a call timeout ([`crate::Options::call_timeout`]), it bounds the
//!   whole call, as libcairn's does: the dial (when the call dials; the
//!   upgrade and the hello), the request's write and the wait for the
//!   answer share one deadline, instead of [`CONNECT_TIMEOUT`],
//!   [`SEND_TIMEOUT`] and [`ANSWER_TIMEOUT`], however the daemon's bytes
//!   trickle in (not each read or write: a daemon that sends part of an
//!   answer and then a byte or a ping now and then, or reads a little now
//!   and then, does not stretch it). When it
//!   passes, the connection is dropped and the call fails as libcairn's
//!   does: `unavailable`, `protocol: no answer to checkpoint from cairnd
//!   within <bound>: the outcome is unknown ...` ([`no_answer`]); such a
//!   call is not handed to libcairn, which would wait again. Without one
//!   (libcairn's default bound, the same 5 minutes), an answer that does
//!   not come whole within [`ANSWER_TIMEOUT`] fails alike ("within
//!   5m0s"), and a write that does not finish within [`SEND_TIMEOUT`]
//!   (each write(2)) or a dial within [`CONNECT_TIMEOUT`] goes through
//!   libcairn as any failed send or dial does. A call timeout of zero
//!   (libcairn: no bound) waits for the answer as long as the daemon
//!   takes, and dials and sends as without one;
//! - another thread's call in progress on the connection (a `try_lock`
//!   that fails), a forked child (the parent's socket is never used there;
//!   libcairn fails with `forked`), a closed Client: libcairn.
//!
//! Embedded clients never use it. `CAIRN_RUST_WIRE=0` (or `false`, `no`,
//! `off`) in the environment when a Client is made turns the path off for
//! that Client.
//!
//! [`Client::checkpoint`]: crate::Client::checkpoint

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::{Error, ErrorCode, Result};
use crate::types::{CheckpointRequest, CheckpointResult};

/// The environment variable that turns the path off ("0").
pub const ENV: &str = "CAIRN_RUST_WIRE";

/// sun_path's 108 bytes less the NUL (PROTOCOL.md §1).
const MAX_SOCKET_PATH: usize = 107;

/// The Go client's default message size limit; a daemon's hello may lower
/// it.
const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// Keeps requests this close to the limit for libcairn: its request ids
/// are not ours, so its message may be a few bytes longer or shorter, and
/// it alone decides (and words) too_large at the boundary.
const SIZE_SLACK: usize = 64;

/// Bounds the whole dial, the upgrade and hello together; a daemon that is
/// slower than that is left to libcairn (which waits up to 15 s). (The
/// connect itself does not wait: on a full listen backlog it fails at
/// once, see connect_now.)
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bounds writing one request: the daemon's own frame deadline (a frame
/// begun and not finished within it is dropped, unprocessed).
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Bounds the wait for an answer once the request was sent, as libcairn's
/// default call timeout bounds its calls: it only turns a hung daemon
/// into `unavailable` (outcome unknown), never an early failure of a slow
/// commit.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// How long after a failed dial the path leaves calls to libcairn before
/// dialing again, so a daemon that refuses (503) is not asked once a turn.
pub const RETRY_GAP: Duration = Duration::from_millis(250);

const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Whether an I/O error is a socket timeout's (SO_RCVTIMEO, SO_SNDTIMEO).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// `d` as Go's `time.Duration.String` prints it, to the millisecond:
/// "0s", "400ms", "1.5s", "1m0s", "1m30.25s", "1h0m0s".
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return if ms == 0 {
            "0s".into()
        } else {
            format!("{ms}ms")
        };
    }
    let (secs, frac) = (ms / 1000, ms % 1000);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out += &format!("{h}h");
    }
    if secs >= 60 {
        out += &format!("{m}m");
    }
    out += &s.to_string();
    if frac > 0 {
        out += format!(".{frac:03}").trim_end_matches('0');
    }
    out.push('s');
    out
}

/// The error of a call whose bound passed with no answer, worded as
/// libcairn's (protocol.NoAnswerError's).
pub fn no_answer(method: &str, bound: Duration) -> Error {
    Error::new(
        ErrorCode::Unavailable,
        format!(
            "protocol: no answer to {method} from cairnd within {}: the outcome is unknown \
             (a request that reached the daemon may still be carried out)",
            go_duration(bound)
        ),
    )
}

/// Whether the environment allows the path (CAIRN_RUST_WIRE is not "0").
pub fn enabled() -> bool {
    match std::env::var_os(ENV) {
        None => true,
        Some(v) => !matches!(v.to_string_lossy().trim(), "0" | "false" | "no" | "off"),
    }
}

/// The socket a client of `workspace` dials (PROTOCOL.md §1): the path in
/// `.cairn/cairnd.addr` when that file exists, else `.cairn/cairnd.sock`.
/// None when neither can serve: a default path too long for sun_path
/// without an addr file means no daemon runs (one would have written the
/// file), and an unreadable or malformed addr file is libcairn's to
/// report. (`_wire.socket_path` of the Python binding, exactly.)
pub fn socket_path(workspace: &Path) -> Option<PathBuf> {
    // os.path.realpath: a path that does not resolve is kept as it is.
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let d = ws.join(".cairn");
    let raw = match std::fs::File::open(d.join("cairnd.addr")) {
        Ok(f) => {
            let mut raw = Vec::new();
            if f.take(4096).read_to_end(&mut raw).is_err() {
                return None;
            }
            raw
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let p = d.join("cairnd.sock");
            return (p.as_os_str().len() <= MAX_SOCKET_PATH).then_some(p);
        }
        Err(_) => return None,
    };
    let p = std::str::from_utf8(&raw).ok()?.trim();
    let p = Path::new(p);
    if !p.is_absolute() || p.as_os_str().len() > MAX_SOCKET_PATH {
        return None;
    }
    Some(p.to_path_buf())
}

// -- CBOR (RFC 8949), the little the checkpoint needs ----------------------

/// Appends the shortest head of major type `major` with argument `n`, as
/// the Go encoder writes it.
fn head(b: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        b.push(m | n as u8);
    } else if n <= 0xff {
        b.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= 0xffff {
        b.push(m | 25);
        b.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        b.push(m | 26);
        b.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        b.push(m | 27);
        b.extend_from_slice(&n.to_be_bytes());
    }
}

fn int(b: &mut Vec<u8>, n: i64) {
    if n < 0 {
        head(b, 1, (-(n + 1)) as u64);
    } else {
        head(b, 0, n as u64);
    }
}

fn text(b: &mut Vec<u8>, s: &str) {
    head(b, 3, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
}

/// Appends the CBOR of one byte string holding `v`'s JSON text (serde_json,
/// as the lib path writes it inside the request's JSON).
fn json_bytes(b: &mut Vec<u8>, scratch: &mut Vec<u8>, v: &Value) -> Option<()> {
    scratch.clear();
    serde_json::to_writer(&mut *scratch, v).ok()?;
    head(b, 2, scratch.len() as u64);
    b.extend_from_slice(scratch);
    Some(())
}

/// Appends the CBOR of a checkpoint's params: what libcairn's Go client
/// sends for the JSON params [`crate::Client::checkpoint`] makes of the
/// same request (`protocol.AppendCheckpointParams`). None when the request
/// is not one it can encode exactly so (see the module doc).
pub fn encode_checkpoint(b: &mut Vec<u8>, r: &CheckpointRequest<'_>) -> Option<()> {
    // serde_json writes a NaN or an infinity as null, which Go decodes
    // into a cost of 0 (or refuses): left to libcairn.
    if !r.usage.cost.is_finite() {
        return None;
    }
    let sid = r.session_id.as_deref().unwrap_or("");
    let mut scratch = Vec::new();
    let state = match &r.state {
        Some(v) => {
            serde_json::to_writer(&mut scratch, v.as_ref()).ok()?;
            Some(std::mem::take(&mut scratch))
        }
        None => None,
    };
    let n = 5 + u64::from(!sid.is_empty()) + u64::from(state.is_some());
    head(b, 5, n);
    text(b, "run_id");
    text(b, &r.run_id);
    if !sid.is_empty() {
        text(b, "session_id");
        text(b, sid);
    }
    text(b, "turn");
    int(b, r.turn);
    text(b, "new_messages");
    head(b, 4, r.new_messages.len() as u64);
    for m in r.new_messages.iter() {
        json_bytes(b, &mut scratch, m)?;
    }
    text(b, "usage");
    head(b, 5, 4);
    text(b, "input_tokens");
    int(b, r.usage.input_tokens);
    text(b, "output_tokens");
    int(b, r.usage.output_tokens);
    text(b, "total_tokens");
    int(b, r.usage.total_tokens);
    text(b, "cost");
    b.push(0xfb);
    b.extend_from_slice(&r.usage.cost.to_bits().to_be_bytes());
    text(b, "tool_calls_count");
    int(b, r.tool_calls_count);
    if let Some(st) = state {
        text(b, "state");
        head(b, 2, st.len() as u64);
        b.extend_from_slice(&st);
    }
    Some(())
}

/// The checkpoint params' CBOR as [`encode_checkpoint`] makes it (for
/// tests).
#[doc(hidden)]
pub fn checkpoint_params(r: &CheckpointRequest<'_>) -> Option<Vec<u8>> {
    let mut b = Vec::new();
    encode_checkpoint(&mut b, r)?;
    Some(b)
}

/// A decoded CBOR item: definite lengths, no tags (PROTOCOL.md §2).
#[derive(Debug, Clone, PartialEq)]
enum Cbor {
    Int(i128),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Cbor>),
    Map(Vec<(Cbor, Cbor)>),
    Bool(bool),
    Null,
    Float(f64),
}

impl Cbor {
    fn get(&self, key: &str) -> Option<&Cbor> {
        match self {
            Cbor::Map(kv) => kv
                .iter()
                .rev() // a repeated key: the last one, as Go keeps it
                .find(|(k, _)| matches!(k, Cbor::Text(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

struct Decoder<'a> {
    b: &'a [u8],
    i: usize,
}

type DecResult<T> = std::result::Result<T, &'static str>;

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> DecResult<&[u8]> {
        if n > self.b.len() - self.i {
            return Err("truncated");
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(s)
    }

    fn arg(&mut self, info: u8) -> DecResult<u64> {
        Ok(match info {
            0..=23 => u64::from(info),
            24 => u64::from(self.take(1)?[0]),
            25 => u64::from(u16::from_be_bytes(self.take(2)?.try_into().unwrap())),
            26 => u64::from(u32::from_be_bytes(self.take(4)?.try_into().unwrap())),
            27 => u64::from_be_bytes(self.take(8)?.try_into().unwrap()),
            _ => return Err("indefinite length or reserved info"),
        })
    }

    fn item(&mut self, depth: usize) -> DecResult<Cbor> {
        if depth > 64 {
            return Err("nested too deeply");
        }
        let ib = self.take(1)?[0];
        let (major, info) = (ib >> 5, ib & 31);
        if major == 7 {
            return Ok(match info {
                20 => Cbor::Bool(false),
                21 => Cbor::Bool(true),
                22 | 23 => Cbor::Null,
                25 => Cbor::Float(f16(u16::from_be_bytes(self.take(2)?.try_into().unwrap()))),
                26 => Cbor::Float(f64::from(f32::from_be_bytes(
                    self.take(4)?.try_into().unwrap(),
                ))),
                27 => Cbor::Float(f64::from_be_bytes(self.take(8)?.try_into().unwrap())),
                _ => return Err("unsupported simple value"),
            });
        }
        let n = self.arg(info)?;
        match major {
            0 => Ok(Cbor::Int(i128::from(n))),
            1 => Ok(Cbor::Int(-1 - i128::from(n))),
            2 | 3 => {
                let len = usize::try_from(n).map_err(|_| "truncated")?;
                let s = self.take(len)?.to_vec();
                if major == 2 {
                    Ok(Cbor::Bytes(s))
                } else {
                    String::from_utf8(s)
                        .map(Cbor::Text)
                        .map_err(|_| "bad UTF-8")
                }
            }
            4 | 5 => {
                // Every item takes at least one byte: a count beyond what
                // is left is truncated (and no huge allocation).
                if n > (self.b.len() - self.i) as u64 {
                    return Err("truncated");
                }
                if major == 4 {
                    (0..n)
                        .map(|_| self.item(depth + 1))
                        .collect::<DecResult<_>>()
                        .map(Cbor::Array)
                } else {
                    let mut kv = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let k = self.item(depth + 1)?;
                        kv.push((k, self.item(depth + 1)?));
                    }
                    Ok(Cbor::Map(kv))
                }
            }
            _ => Err("tag"),
        }
    }
}

/// A half-precision float's value.
fn f16(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// The one CBOR item `b` holds.
fn decode(b: &[u8]) -> DecResult<Cbor> {
    let mut d = Decoder { b, i: 0 };
    let v = d.item(0)?;
    if d.i != b.len() {
        return Err("trailing bytes");
    }
    Ok(v)
}

/// `{"id": ` as both encoders begin an answer.
const ANSWER_ID: &[u8] = b"\xa2\x62id";
/// `"result": {"generation": ` as the daemon encodes a checkpoint's.
const ANSWER_RESULT: &[u8] = b"\x66result\xa2\x6ageneration";
const ANSWER_COUNT: &[u8] = b"\x6dmessage_count";

/// The unsigned int at `b[i]` and where it ends.
fn uint_at(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let ib = *b.get(i)?;
    if ib >> 5 != 0 {
        return None;
    }
    let mut d = Decoder { b, i: i + 1 };
    let n = d.arg(ib & 31).ok()?;
    Some((n, d.i))
}

/// The int (major type 0 or 1, fitting an i64) at `b[i]` and where it ends.
fn int_at(b: &[u8], i: usize) -> Option<(i64, usize)> {
    let ib = *b.get(i)?;
    let mut d = Decoder { b, i: i + 1 };
    let n = d.arg(ib & 31).ok()?;
    match ib >> 5 {
        0 => Some((i64::try_from(n).ok()?, d.i)),
        1 => Some((-1 - i64::try_from(n).ok()?, d.i)),
        _ => None,
    }
}

// -- the connection ---------------------------------------------------------

/// Why the connection is gone; the text says how (after "connection
/// lost: ").
#[derive(Debug)]
struct Lost(String);

/// What can go wrong on the connection.
#[derive(Debug)]
enum Fail {
    /// The connection is gone.
    Lost(Lost),
    /// A frame did not leave whole: nothing was processed.
    SendFailed,
    /// A frame did not leave whole within the write bound (the socket's
    /// write timeout): nothing was processed.
    SendTimedOut,
    /// The read bound passed: nothing arrived within the socket's read
    /// timeout, or the whole answer did not within its bound.
    ReadTimedOut,
}

impl From<Lost> for Fail {
    fn from(l: Lost) -> Fail {
        Fail::Lost(l)
    }
}

fn lost(s: impl Into<String>) -> Fail {
    Fail::Lost(Lost(s.into()))
}

/// Random bytes, from /dev/urandom a block at a time (one open and read
/// per thousand frames' mask keys).
struct Random {
    block: Vec<u8>,
}

impl Random {
    fn take<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        if self.block.len() < N {
            let mut b = vec![0u8; 4096];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
            self.block = b;
        }
        let at = self.block.len() - N;
        let out = self.block[at..].try_into().unwrap();
        self.block.truncate(at);
        Ok(out)
    }
}

/// XORs `data` with the 4-byte `key`, starting at key offset 0.
fn mask(data: &mut [u8], key: [u8; 4]) {
    let k8 = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes((&*c).try_into().unwrap()) ^ k8;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (j, x) in chunks.into_remainder().iter_mut().enumerate() {
        *x ^= key[j & 3];
    }
}

/// Room left before a request message for the frame header and mask key
/// (2 + 8 + 4 bytes at most).
const FRAME_ROOM: usize = 14;

/// The `{"id": id, "method": ` ... `"params": ` of a request, as both
/// clients write it.
fn request_head(b: &mut Vec<u8>, id: u64, method: &str) {
    head(b, 5, 3);
    text(b, "id");
    head(b, 0, id);
    text(b, "method");
    text(b, method);
    text(b, "params");
}

/// The read buffer's size: zeroed once per connection, grown only for a
/// message larger than that.
const READ_ROOM: usize = 64 << 10;

/// One WebSocket connection to cairnd, used by one call at a time.
struct Conn {
    sock: UnixStream,
    /// What was read and not consumed yet: `buf[pos..end]`; `buf[end..]`
    /// is room for the next read.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    next_id: u64,
    max_size: usize,
    random: Random,
    /// The request being built (frame room, then the message).
    out: Vec<u8>,
    /// With a call timeout: the bound of one whole write (sends that never
    /// wait, and polls for room between them); None: the socket's write
    /// timeout bounds each write(2).
    write_bound: Option<Duration>,
    /// The bound of one whole answer (the socket's read timeout bounds its
    /// first read, a poll for what is left of it each later one); None: no
    /// bound.
    read_bound: Option<Duration>,
    /// The deadline of what is under way, which its writes and reads share
    /// however the daemon's bytes trickle in: the dial (within the connect
    /// bound, and by the dialing call's deadline), a call with a call
    /// timeout (checkpoint sets it), or the answer read_answer waits for
    /// within read_bound; None: none.
    deadline: Option<Instant>,
    /// The socket's read timeout now.
    read_timeout: Option<Duration>,
    /// Whether read_answer (or the upgrade) has read since it began.
    read_once: bool,
}

/// The socket timeouts of a Wire's connections.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// The whole dial: the upgrade's and the hello's reads together (each
    /// write, which never waits on a daemon that reads).
    connect: Duration,
    /// Each write of a request (each write(2), or with a call timeout the
    /// whole write).
    send: Duration,
    /// One whole answer; None: no bound (a call timeout of zero).
    answer: Option<Duration>,
    /// Whether `send` bounds the whole write (a call timeout).
    whole_write: bool,
}

impl Bounds {
    fn new(call_timeout: Option<Duration>) -> Bounds {
        match call_timeout {
            None => Bounds {
                connect: CONNECT_TIMEOUT,
                send: SEND_TIMEOUT,
                answer: Some(ANSWER_TIMEOUT),
                whole_write: false,
            },
            // No bound: libcairn waits for the answer as long as the
            // daemon takes, and so does the path (None: std refuses a
            // zero read timeout). The dial and the send keep the bounds
            // they have without a call timeout: a daemon too slow for
            // them is left to libcairn, as then (call_timeout() is
            // None).
            Some(d) if d.is_zero() => Bounds {
                answer: None,
                ..Bounds::new(None)
            },
            Some(d) => Bounds {
                connect: d,
                send: d,
                answer: Some(d),
                whole_write: true,
            },
        }
    }

    /// The call timeout that bounds a whole checkpoint, dial, write and
    /// answer, if any: a zero one is None here, its dial and send failing
    /// as without one (to libcairn).
    fn call_timeout(&self) -> Option<Duration> {
        self.whole_write.then_some(self.send)
    }
}

impl Conn {
    /// Dials within `bounds.connect`, and by `call_by` (the deadline of
    /// the call that dials) when there is one.
    fn dial(
        path: &Path,
        bounds: Bounds,
        call_by: Option<Instant>,
    ) -> std::result::Result<Conn, Fail> {
        let by = Instant::now() + bounds.connect;
        let by = call_by.map_or(by, |c| c.min(by));
        let sock = connect_now(path).map_err(|e| lost(e.to_string()))?;
        let io = |e: std::io::Error| lost(e.to_string());
        sock.set_read_timeout(Some(bounds.connect)).map_err(io)?;
        sock.set_write_timeout(Some(bounds.connect)).map_err(io)?;
        let mut c = Conn {
            sock,
            buf: vec![0; READ_ROOM],
            pos: 0,
            end: 0,
            next_id: 1,
            max_size: DEFAULT_MAX_MESSAGE,
            random: Random { block: Vec::new() },
            out: Vec::with_capacity(16 << 10),
            write_bound: None,
            read_bound: bounds.answer,
            deadline: Some(by),
            read_timeout: Some(bounds.connect),
            read_once: false,
        };
        c.upgrade()?;
        c.hello()?;
        c.deadline = None;
        c.sock.set_read_timeout(bounds.answer).map_err(io)?;
        c.read_timeout = bounds.answer;
        c.sock.set_write_timeout(Some(bounds.send)).map_err(io)?;
        c.write_bound = bounds.call_timeout();
        Ok(c)
    }

    fn upgrade(&mut self) -> std::result::Result<(), Fail> {
        let key = self.random.take::<16>().map_err(|e| lost(e.to_string()))?;
        let key = crate::base64::encode(&key);
        let req = format!(
            "GET / HTTP/1.1\r\nHost: cairnd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Protocol: cairn.v1\r\n\r\n"
        );
        self.send_all(req.as_bytes())?;
        let end = loop {
            let data = &self.buf[..self.end];
            if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if data.len() > 65536 {
                return Err(lost("upgrade answer headers too long"));
            }
            self.wait_to_read()?;
            match self.read_into_room(4096) {
                Ok(0) => return Err(lost("the daemon closed the connection during the upgrade")),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if timed_out(&e) => return Err(Fail::ReadTimedOut),
                Err(e) => return Err(lost(e.to_string())),
            }
        };
        // What follows the headers is the first frames'.
        self.pos = end + 4;
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap_or("");
        if status.split(' ').nth(1) != Some("101") {
            return Err(lost(format!("upgrade refused: {status}")));
        }
        let mut upgrade = "";
        let mut connection = String::new();
        let mut accept = "";
        let mut protocol = "";
        for line in lines {
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "upgrade" => upgrade = v,
                "connection" => connection = v.to_ascii_lowercase(),
                "sec-websocket-accept" => accept = v,
                "sec-websocket-protocol" => protocol = v,
                _ => {}
            }
        }
        let mut k = key.into_bytes();
        k.extend_from_slice(GUID);
        let want = crate::base64::encode(&crate::sha1::digest(&k));
        if !upgrade.eq_ignore_ascii_case("websocket")
            || !connection.contains("upgrade")
            || accept != want
            || protocol != "cairn.v1"
        {
            return Err(lost("bad upgrade answer"));
        }
        Ok(())
    }

    fn hello(&mut self) -> std::result::Result<(), Fail> {
        let mut params = Vec::new();
        head(&mut params, 5, 2);
        text(&mut params, "protocol_version");
        head(&mut params, 0, 1);
        text(&mut params, "client");
        text(
            &mut params,
            concat!("cairn-rust ", env!("CARGO_PKG_VERSION")),
        );
        let id = self
            .send_request("hello", |b| {
                b.extend_from_slice(&params);
                Some(())
            })?
            .expect("a hello is far below any size limit");
        let msg = self.read_answer(id)?;
        let ans = decode(&msg).map_err(|e| lost(format!("hello answer: {e}")))?;
        let Some(res @ Cbor::Map(_)) = ans.get("result") else {
            return Err(lost("hello failed"));
        };
        if let Some(Cbor::Int(m)) = res.get("limits").and_then(|l| l.get("max_message_size")) {
            if *m > 0 && *m < self.max_size as i128 {
                self.max_size = *m as usize;
            }
        }
        Ok(())
    }

    /// Writes all of `data`; SendFailed (SendTimedOut: the write bound
    /// passed) when not all of it left (the daemon then drops the partial
    /// frame unread: no request was made).
    fn send_all(&mut self, data: &[u8]) -> std::result::Result<(), Fail> {
        let fail = |e: &std::io::Error| {
            if timed_out(e) {
                Fail::SendTimedOut
            } else {
                Fail::SendFailed
            }
        };
        let Some(bound) = self.write_bound else {
            return self.sock.write_all(data).map_err(|e| fail(&e));
        };
        // A call timeout bounds the whole write. SO_SNDTIMEO cannot: it
        // bounds each wait for room in the socket's buffer, so a daemon
        // that keeps reading a little keeps one write(2) going for as long
        // as the request takes. Sends that never wait (MSG_DONTWAIT), and
        // between them a poll for room for what is left of the bound; a
        // request that fits is one send(2), as without a bound.
        let deadline = self.deadline.unwrap_or_else(|| Instant::now() + bound);
        let mut at = 0;
        loop {
            match send_now(&self.sock, &data[at..]) {
                Ok(0) => return Err(Fail::SendFailed),
                Ok(n) => at += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return Err(Fail::SendFailed),
            }
            if at == data.len() {
                return Ok(());
            }
            if !ready_by(&self.sock, POLLOUT, deadline) {
                return Err(Fail::SendTimedOut);
            }
        }
    }

    /// Sends one request (params: appends the CBOR of its params; None:
    /// not one this path sends) and returns its id; None (nothing sent)
    /// when params refused or it is too close to the message size limit
    /// for this path.
    fn send_request(
        &mut self,
        method: &str,
        params: impl FnOnce(&mut Vec<u8>) -> Option<()>,
    ) -> std::result::Result<Option<u64>, Fail> {
        let id = self.next_id;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.resize(FRAME_ROOM, 0);
        request_head(&mut out, id, method);
        let ok = params(&mut out).is_some();
        let n = out.len() - FRAME_ROOM;
        if !ok || n > self.max_size - SIZE_SLACK {
            self.keep(out);
            return Ok(None);
        }
        self.next_id = id + 1;
        let at = match self.frame_head(&mut out, 2, n) {
            Ok(at) => at,
            Err(e) => {
                self.keep(out);
                return Err(e);
            }
        };
        let r = self.send_all(&out[at..]);
        self.keep(out);
        r.map(|()| Some(id))
    }

    /// Keeps `out`'s allocation for the next request unless it is large.
    fn keep(&mut self, out: Vec<u8>) {
        if out.capacity() <= 1 << 20 {
            self.out = out;
        }
    }

    /// Writes the frame header and mask key of a masked frame of `opcode`
    /// whose n-byte payload follows FRAME_ROOM in `out`, masks the payload
    /// in place, and returns where the frame begins.
    fn frame_head(
        &mut self,
        out: &mut [u8],
        opcode: u8,
        n: usize,
    ) -> std::result::Result<usize, Fail> {
        let key = self.random.take::<4>().map_err(|_| Fail::SendFailed)?;
        let mut h = [0u8; 10];
        h[0] = 0x80 | opcode;
        let hl = if n < 126 {
            h[1] = 0x80 | n as u8;
            2
        } else if n < 0x10000 {
            h[1] = 0x80 | 126;
            h[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            4
        } else {
            h[1] = 0x80 | 127;
            h[2..10].copy_from_slice(&(n as u64).to_be_bytes());
            10
        };
        let at = FRAME_ROOM - 4 - hl;
        out[at..at + hl].copy_from_slice(&h[..hl]);
        out[FRAME_ROOM - 4..FRAME_ROOM].copy_from_slice(&key);
        mask(&mut out[FRAME_ROOM..], key);
        Ok(at)
    }

    /// Sends a control frame (a pong, a close).
    fn send_control(&mut self, opcode: u8, payload: &[u8]) -> std::result::Result<(), Fail> {
        let mut out = vec![0u8; FRAME_ROOM];
        out.extend_from_slice(payload);
        let at = self.frame_head(&mut out, opcode, payload.len())?;
        self.send_all(&out[at..])
    }

    /// Sends a close frame (1000) without waiting, as the Go client does on
    /// close; errors are ignored.
    fn close_gracefully(&mut self) {
        if self.sock.set_nonblocking(true).is_ok() {
            let _ = self.send_control(8, &[0x03, 0xe8]);
        }
    }

    /// Reads what arrived since the last call without waiting: a close
    /// frame, EOF or a reset means the connection is gone (Lost) before
    /// anything is sent on it; pings are answered. When nothing is
    /// buffered or arrived (the usual case) that is one poll.
    fn idle_check(&mut self) -> std::result::Result<(), Fail> {
        if self.pos == self.end && !readable_now(&self.sock) {
            return Ok(());
        }
        self.sock
            .set_nonblocking(true)
            .map_err(|e| lost(e.to_string()))?;
        let r = self.read_available();
        self.sock
            .set_nonblocking(false)
            .map_err(|e| lost(e.to_string()))?;
        r?;
        while self.pos < self.end {
            // Whole frames only; a partial one waits for the next read.
            if self.frame_len().is_none() {
                break;
            }
            self.read_message(None)?;
        }
        Ok(())
    }

    fn read_available(&mut self) -> std::result::Result<(), Fail> {
        loop {
            match self.read_into_room(1) {
                Ok(0) => return Err(lost("EOF")),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(lost(e.to_string())),
            }
        }
    }

    /// The length of the whole frame at the front of the buffer, if it is
    /// all there.
    fn frame_len(&self) -> Option<usize> {
        let b = &self.buf[self.pos..self.end];
        if b.len() < 2 {
            return None;
        }
        let (n, at) = match b[1] & 0x7f {
            126 if b.len() >= 4 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
            127 if b.len() >= 10 => (u64::from_be_bytes(b[2..10].try_into().unwrap()), 10),
            126 | 127 => return None,
            n => (u64::from(n), 2),
        };
        let total = (at as u64).checked_add(n)?;
        (b.len() as u64 >= total).then_some(total as usize)
    }

    /// Reads once into the room after the unconsumed bytes, first moving
    /// them to the front, or growing the buffer, so that at least `room`
    /// bytes fit. Returns what the read returned.
    fn read_into_room(&mut self, room: usize) -> std::io::Result<usize> {
        if self.pos == self.end {
            (self.pos, self.end) = (0, 0);
        }
        if self.buf.len() - self.end < room {
            self.buf.copy_within(self.pos..self.end, 0);
            (self.pos, self.end) = (0, self.end - self.pos);
            if self.buf.len() - self.end < room {
                self.buf.resize(self.end + room.max(READ_ROOM), 0);
            }
        }
        let k = self.sock.read(&mut self.buf[self.end..])?;
        self.end += k;
        Ok(k)
    }

    /// Reads until the buffer holds at least n unconsumed bytes.
    fn fill(&mut self, n: usize) -> std::result::Result<(), Fail> {
        while self.end - self.pos < n {
            self.wait_to_read()?;
            match self.read_into_room(n - (self.end - self.pos)) {
                Ok(0) => {
                    return Err(lost(
                        "failed to get reader: failed to read frame header: EOF",
                    ));
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if timed_out(&e) => return Err(Fail::ReadTimedOut),
                Err(e) => return Err(lost(e.to_string())),
            }
        }
        Ok(())
    }

    /// Reads one data message (control frames in between are handled) and
    /// returns it, or None for a message that is not the answer to `want`
    /// (a push, a text message, another id).
    fn read_message(&mut self, want: Option<u64>) -> std::result::Result<Option<Vec<u8>>, Fail> {
        let mut parts: Vec<u8> = Vec::new();
        let mut any = false;
        let mut is_text = false;
        let limit = self.max_size as u64 + 16;
        loop {
            self.fill(2)?;
            let (b0, b1) = (self.buf[self.pos], self.buf[self.pos + 1]);
            if b1 & 0x80 != 0 {
                return Err(lost("the daemon sent a masked frame"));
            }
            let (n, at) = match b1 & 0x7f {
                126 => {
                    self.fill(4)?;
                    let b = &self.buf[self.pos..];
                    (u64::from(u16::from_be_bytes([b[2], b[3]])), 4)
                }
                127 => {
                    self.fill(10)?;
                    let b = &self.buf[self.pos..];
                    (u64::from_be_bytes(b[2..10].try_into().unwrap()), 10)
                }
                n => (u64::from(n), 2),
            };
            if n > limit {
                return Err(lost("a message over the size limit"));
            }
            let n = n as usize;
            self.fill(at + n)?;
            let start = self.pos + at;
            self.pos = start + n;
            let op = b0 & 0x0f;
            match op {
                8 => {
                    let p = &self.buf[start..start + n];
                    let code = if n >= 2 {
                        u16::from_be_bytes([p[0], p[1]])
                    } else {
                        1005
                    };
                    let reason = if n > 2 {
                        String::from_utf8_lossy(&p[2..]).into_owned()
                    } else {
                        String::new()
                    };
                    return Err(lost(format!(
                        "failed to get reader: received close frame: status = {} and reason = \"{reason}\"",
                        status_name(code)
                    )));
                }
                9 | 10 => {
                    if op == 9 {
                        let p = self.buf[start..start + n].to_vec();
                        self.send_control(10, &p)?;
                    }
                    if want.is_none() && !any && self.frame_len().is_none() {
                        return Ok(None); // idle_check: nothing more has arrived
                    }
                    continue;
                }
                0..=2 => {}
                _ => return Err(lost(format!("a frame with reserved opcode {op}"))),
            }
            if op != 0 && any {
                return Err(lost("a new message inside a fragmented one"));
            }
            if op == 0 && !any {
                return Err(lost("a continuation frame without a message"));
            }
            if op != 0 {
                is_text = op == 1;
            }
            any = true;
            parts.extend_from_slice(&self.buf[start..start + n]);
            if parts.len() as u64 > limit {
                return Err(lost("a message over the size limit"));
            }
            if b0 & 0x80 != 0 {
                break;
            }
        }
        let Some(want) = want else { return Ok(None) };
        if is_text {
            return Ok(None);
        }
        let id = if parts.starts_with(ANSWER_ID) {
            uint_at(&parts, ANSWER_ID.len()).map(|(id, _)| id)
        } else {
            match decode(&parts) {
                Ok(ans) => match ans.get("id") {
                    Some(Cbor::Int(id)) => u64::try_from(*id).ok(),
                    _ => None,
                },
                Err(_) => None,
            }
        };
        Ok((id == Some(want)).then_some(parts))
    }

    /// Before each read under a deadline: waits, for what is left until
    /// it, for something to read (data, EOF or an error); ReadTimedOut
    /// when it passes first. So the bound covers the whole answer (or
    /// dial), which SO_RCVTIMEO cannot: it bounds each read(2), and a
    /// daemon that sends part of an answer and then a byte (or a ping) now
    /// and then would keep the call waiting for ever. A first read (of an
    /// answer, or of the upgrade's) waits in read(2) alone when the
    /// socket's read timeout ends by the deadline (to the millisecond): an
    /// answer that arrives at once costs one read, as without a bound.
    fn wait_to_read(&mut self) -> std::result::Result<(), Fail> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        let first = !std::mem::replace(&mut self.read_once, true);
        let slack = deadline + Duration::from_millis(1);
        if first
            && self
                .read_timeout
                .is_some_and(|t| Instant::now() + t <= slack)
        {
            return Ok(());
        }
        if !ready_by(&self.sock, POLLIN, deadline) {
            return Err(Fail::ReadTimedOut);
        }
        Ok(())
    }

    /// The answer to request `id`, skipping pushes and pings, by the
    /// deadline under way (the dial's, the call's) or else within
    /// read_bound (None: no bound).
    fn read_answer(&mut self, id: u64) -> std::result::Result<Vec<u8>, Fail> {
        let own = self.deadline.is_none();
        if own {
            self.deadline = self.read_bound.map(|d| Instant::now() + d);
        }
        self.read_once = false;
        let r = loop {
            match self.read_message(Some(id)) {
                Ok(Some(msg)) => break Ok(msg),
                Ok(None) => {}
                Err(f) => break Err(f),
            }
        };
        if own {
            self.deadline = None;
        }
        r
    }
}

/// A connect to a Unix socket that does not wait for room in its
/// listener's backlog. std's connect waits, for ever, while the backlog
/// is full (a daemon stopped or swamped, with thousands of connections
/// queued); this fails at once with EAGAIN instead, and the call goes to
/// libcairn, which says `unavailable` in time, as Python's dial does. On
/// Linux a non-blocking connect on a Unix socket either completes at once
/// or fails; the socket is made blocking again before it is returned.
/// connect_now uses it only where the socket constants and `sockaddr_un`
/// are Linux's generic ones (RAW_UNIX_CONNECT); elsewhere std's connect.
mod unix_connect {
    use std::io::ErrorKind;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::path::Path;

    pub(super) fn connect_now(path: &Path) -> std::io::Result<UnixStream> {
        let addr = SockaddrUn::new(path)?;
        let sock = UnixStream::from(unix_socket()?);
        sock.set_nonblocking(true)?;
        // SAFETY: addr is a whole sockaddr_un for the call's duration.
        if unsafe { connect(sock.as_raw_fd(), &addr, size_of::<SockaddrUn>() as u32) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        sock.set_nonblocking(false)?;
        Ok(sock)
    }

    /// `struct sockaddr_un`.
    #[repr(C)]
    pub(super) struct SockaddrUn {
        family: u16,
        path: [u8; 108],
    }

    impl SockaddrUn {
        pub(super) fn new(path: &Path) -> std::io::Result<SockaddrUn> {
            use std::os::unix::ffi::OsStrExt;
            let b = path.as_os_str().as_bytes();
            let mut addr = SockaddrUn {
                family: 1, // AF_UNIX
                path: [0; 108],
            };
            if b.len() >= addr.path.len() || b.contains(&0) {
                return Err(std::io::Error::new(
                    ErrorKind::InvalidInput,
                    format!("socket path {} is too long or holds a NUL", path.display()),
                ));
            }
            addr.path[..b.len()].copy_from_slice(b);
            Ok(addr)
        }
    }

    unsafe extern "C" {
        fn socket(
            domain: std::ffi::c_int,
            ty: std::ffi::c_int,
            protocol: std::ffi::c_int,
        ) -> std::ffi::c_int;
        fn connect(fd: std::ffi::c_int, addr: *const SockaddrUn, len: u32) -> std::ffi::c_int;
    }

    /// A new AF_UNIX stream socket, close-on-exec.
    pub(super) fn unix_socket() -> std::io::Result<OwnedFd> {
        const SOCK_CLOEXEC: std::ffi::c_int = 0o2000000;
        // SAFETY: socket(2) takes no pointers.
        let fd = unsafe { socket(1, 1 | SOCK_CLOEXEC, 0) }; // AF_UNIX, SOCK_STREAM
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor, owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// Whether connect_now connects without waiting (see unix_connect).
const RAW_UNIX_CONNECT: bool = cfg!(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "x86",
        target_arch = "arm",
        target_arch = "riscv64"
    )
));

fn connect_now(path: &Path) -> std::io::Result<UnixStream> {
    if RAW_UNIX_CONNECT {
        unix_connect::connect_now(path)
    } else {
        UnixStream::connect(path)
    }
}

/// poll(2)'s `struct pollfd`.
#[repr(C)]
struct PollFd {
    fd: std::ffi::c_int,
    events: std::ffi::c_short,
    revents: std::ffi::c_short,
}

/// poll(2)'s `nfds_t`.
#[cfg(target_os = "linux")]
type NFds = std::ffi::c_ulong;
#[cfg(not(target_os = "linux"))]
type NFds = std::ffi::c_uint;

unsafe extern "C" {
    fn poll(fds: *mut PollFd, nfds: NFds, timeout: std::ffi::c_int) -> std::ffi::c_int;
    fn send(
        fd: std::ffi::c_int,
        buf: *const std::ffi::c_void,
        len: usize,
        flags: std::ffi::c_int,
    ) -> isize;
}

/// poll(2)'s events, the same values on Linux and the BSDs.
const POLLIN: std::ffi::c_short = 1;
const POLLOUT: std::ffi::c_short = 4;

/// send(2)'s flags: do not wait for room; on Linux, no SIGPIPE either (a
/// daemon gone fails the send with EPIPE).
#[cfg(target_os = "linux")]
const SEND_FLAGS: std::ffi::c_int = 0x40 | 0x4000; // MSG_DONTWAIT | MSG_NOSIGNAL
#[cfg(not(target_os = "linux"))]
const SEND_FLAGS: std::ffi::c_int = 0x80; // MSG_DONTWAIT

/// Sends what of `data` fits in `sock`'s buffer now, without waiting
/// (WouldBlock when nothing does).
fn send_now(sock: &UnixStream, data: &[u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: data is valid for len bytes for the call's duration.
    let n = unsafe {
        send(
            sock.as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            SEND_FLAGS,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One poll(2) of `sock` for `events`, for up to `within` (whole
/// milliseconds, rounded up: a bound left is never polled as 0):
/// Some(ready), ready also for an error or EOF, or when poll itself fails,
/// so that the caller looks; None when a signal interrupted it (EINTR,
/// whatever the handler's SA_RESTART: poll is never restarted).
fn poll_once(sock: &UnixStream, events: std::ffi::c_short, within: Duration) -> Option<bool> {
    use std::os::fd::AsRawFd;
    let mut p = PollFd {
        fd: sock.as_raw_fd(),
        events,
        revents: 0,
    };
    let ms = within
        .as_nanos()
        .div_ceil(1_000_000)
        .min(std::ffi::c_int::MAX as u128);
    // SAFETY: p is one valid pollfd for the call's duration.
    let n = unsafe { poll(&mut p, 1, ms as std::ffi::c_int) };
    if n < 0 && std::io::Error::last_os_error().kind() == ErrorKind::Interrupted {
        return None;
    }
    Some(n != 0)
}

/// Whether `sock` becomes ready for `events` by `deadline` (see
/// poll_once); false once it has passed. A signal does not end the wait:
/// the poll goes on for what is left, or the caller would read or write
/// under the socket's own timeout, as long as the whole bound again.
fn ready_by(sock: &UnixStream, events: std::ffi::c_short, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if let Some(ready) = poll_once(sock, events, left) {
            return ready;
        }
    }
}

/// Whether `sock` has something to read (data, EOF or an error) right
/// now; true also when poll fails, so that the caller looks.
fn readable_now(sock: &UnixStream) -> bool {
    poll_once(sock, POLLIN, Duration::ZERO) != Some(false)
}

/// How the Go client (coder/websocket) names a close status in its error.
fn status_name(code: u16) -> String {
    match code {
        1000 => "StatusNormalClosure".into(),
        1001 => "StatusGoingAway".into(),
        1008 => "StatusPolicyViolation".into(),
        1009 => "StatusMessageTooBig".into(),
        1011 => "StatusInternalError".into(),
        _ => format!("StatusCode({code})"),
    }
}

/// The result of a checkpoint's answer, or the error it carries (Ok(Err)).
fn checkpoint_answer(msg: &[u8]) -> std::result::Result<Result<CheckpointResult>, Lost> {
    // The usual answer, as the daemon encodes it (appendSuccess,
    // appendCheckpointResult), read without the general decoder.
    if let Some((_, i)) = uint_at(msg, ANSWER_ID.len()) {
        if msg[i..].starts_with(ANSWER_RESULT) {
            if let Some((generation, i)) = uint_at(msg, i + ANSWER_RESULT.len()) {
                if msg[i..].starts_with(ANSWER_COUNT) {
                    if let Some((message_count, end)) = int_at(msg, i + ANSWER_COUNT.len()) {
                        if end == msg.len() {
                            return Ok(Ok(CheckpointResult {
                                generation,
                                message_count,
                            }));
                        }
                    }
                }
            }
        }
    }
    let ans = decode(msg).map_err(|e| Lost(format!("an answer that is not CBOR: {e}")))?;
    if !matches!(ans, Cbor::Map(_)) {
        return Err(Lost("an answer that is not a map".into()));
    }
    if let Some(err @ Cbor::Map(_)) = ans.get("error") {
        // As libcairn reports a daemon's error: its code (an unknown one
        // kept as spelt) and message; data is not passed on.
        let code = match err.get("code") {
            Some(Cbor::Text(s)) if !s.is_empty() => s.as_str(),
            _ => "internal",
        };
        let message = match err.get("message") {
            Some(Cbor::Text(s)) => s.clone(),
            _ => String::new(),
        };
        return Ok(Err(Error::new(ErrorCode::from_code(code), message)));
    }
    let Some(res @ Cbor::Map(_)) = ans.get("result") else {
        return Err(Lost("an answer with neither result nor error".into()));
    };
    let num = |k: &str| match res.get(k) {
        Some(Cbor::Int(n)) => *n,
        _ => 0,
    };
    Ok(Ok(CheckpointResult {
        generation: u64::try_from(num("generation")).unwrap_or(0),
        message_count: i64::try_from(num("message_count")).unwrap_or(0),
    }))
}

struct State {
    conn: Option<Conn>,
    retry_at: Option<Instant>,
    /// The workspace's absolute path, once known.
    workspace: Option<PathBuf>,
}

/// The native checkpoint path of one daemon-mode Client.
pub struct Wire {
    state: Mutex<State>,
    bounds: Bounds,
    pid: u32,
    closed: AtomicBool,
    /// The checkpoints this path sent (tests read it).
    sent: AtomicU64,
    /// The checkpoints it left to libcairn (tests read it).
    handed: AtomicU64,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("sent", &self.sent.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Wire {
    /// A path for a client of `workspace` (None: the one libcairn found,
    /// asked for when first needed) whose calls libcairn bounds with
    /// `call_timeout` (None: its default, [`ANSWER_TIMEOUT`]; zero: no
    /// bound).
    pub fn new(workspace: Option<PathBuf>, call_timeout: Option<Duration>) -> Wire {
        Wire {
            state: Mutex::new(State {
                conn: None,
                retry_at: None,
                workspace,
            }),
            bounds: Bounds::new(call_timeout),
            pid: std::process::id(),
            closed: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            handed: AtomicU64::new(0),
        }
    }

    /// How many checkpoints this path sent.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Counts a checkpoint this path left to libcairn (its Client calls it).
    pub fn handed(&self) {
        self.handed.fetch_add(1, Ordering::Relaxed);
    }

    /// How many checkpoints this path left to libcairn.
    pub fn handed_count(&self) -> u64 {
        self.handed.load(Ordering::Relaxed)
    }

    /// Holds the connection as a call in progress does (for tests).
    pub fn hold(&self) -> Option<MutexGuard<'_, impl Sized>> {
        self.state.try_lock().ok()
    }

    fn lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::WouldBlock) => None,
            Err(TryLockError::Poisoned(p)) => {
                // A call panicked with the connection in an unknown state.
                let mut g = p.into_inner();
                g.conn = None;
                self.state.clear_poison();
                Some(g)
            }
        }
    }

    /// Closes the connection (idempotent). A call in progress on another
    /// thread closes it when it is done.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(mut g) = self.lock() {
            self.drop_conn(&mut g, true);
        }
    }

    fn drop_conn(&self, st: &mut State, graceful: bool) {
        if let Some(mut c) = st.conn.take() {
            // Never in a forked child: the socket is the parent's (closing
            // our copy of the descriptor does not end the parent's).
            if graceful && std::process::id() == self.pid {
                c.close_gracefully();
            }
        }
    }

    /// A new connection; None: none to be had (use libcairn); an error:
    /// with a call timeout, a dial the daemon took and did not answer
    /// within it (stopped, stuck), which libcairn would wait on again.
    fn connect(
        &self,
        st: &mut State,
        workspace: &dyn Fn() -> Option<PathBuf>,
        call_by: Option<Instant>,
    ) -> Result<Option<Conn>> {
        if st.retry_at.is_some_and(|t| Instant::now() < t) {
            return Ok(None);
        }
        if st.workspace.is_none() {
            st.workspace = workspace();
        }
        let dialed = st
            .workspace
            .as_deref()
            .and_then(socket_path)
            .map(|p| Conn::dial(&p, self.bounds, call_by));
        st.retry_at = (!matches!(dialed, Some(Ok(_)))).then(|| Instant::now() + RETRY_GAP);
        match (dialed, self.bounds.call_timeout()) {
            (Some(Ok(c)), _) => Ok(Some(c)),
            (Some(Err(Fail::ReadTimedOut | Fail::SendTimedOut)), Some(d)) => {
                Err(no_answer("checkpoint", d))
            }
            _ => Ok(None),
        }
    }

    /// Sends the checkpoint `r` and returns its result; Ok(None) means
    /// nothing was sent: use libcairn. `workspace` gives the workspace
    /// libcairn resolved, when the path does not know it yet.
    pub fn checkpoint(
        &self,
        r: &CheckpointRequest<'_>,
        workspace: &dyn Fn() -> Option<PathBuf>,
    ) -> Result<Option<CheckpointResult>> {
        if self.closed.load(Ordering::Acquire) || std::process::id() != self.pid {
            return Ok(None);
        }
        let Some(mut st) = self.lock() else {
            return Ok(None);
        };
        // With a call timeout, one deadline for the whole call: the dial
        // (if any), the write and the answer share it, as in libcairn.
        let call_by = self.bounds.call_timeout().map(|d| Instant::now() + d);
        let out = self.checkpoint_locked(&mut st, r, workspace, call_by);
        if let Some(c) = st.conn.as_mut() {
            c.deadline = None;
        }
        if self.closed.load(Ordering::Acquire) {
            self.drop_conn(&mut st, true);
        }
        out
    }

    fn checkpoint_locked(
        &self,
        st: &mut State,
        r: &CheckpointRequest<'_>,
        workspace: &dyn Fn() -> Option<PathBuf>,
        call_by: Option<Instant>,
    ) -> Result<Option<CheckpointResult>> {
        if let Some(c) = st.conn.as_mut() {
            if c.idle_check().is_err() {
                self.drop_conn(st, false);
            }
        }
        if st.conn.is_none() {
            st.conn = self.connect(st, workspace, call_by)?;
        }
        let Some(c) = st.conn.as_mut() else {
            return Ok(None);
        };
        c.deadline = call_by;
        let id = match c.send_request("checkpoint", |b| encode_checkpoint(b, r)) {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(None),
            Err(f) => {
                // Lost or not sent whole: nothing was processed.
                self.drop_conn(st, false);
                return match (f, self.bounds.call_timeout()) {
                    // The call's bound passed: libcairn would wait again.
                    (Fail::SendTimedOut, Some(d)) => Err(no_answer("checkpoint", d)),
                    _ => Ok(None),
                };
            }
        };
        self.sent.fetch_add(1, Ordering::Relaxed);
        let answer = c
            .read_answer(id)
            .and_then(|msg| checkpoint_answer(&msg).map_err(Fail::Lost));
        match answer {
            Ok(res) => res.map(Some),
            Err(f) => {
                self.drop_conn(st, false);
                let why = match (f, self.bounds.call_timeout()) {
                    (Fail::Lost(Lost(s)), _) => s,
                    // Only a bounded read times out.
                    (Fail::ReadTimedOut, _) => {
                        let d = self.bounds.answer.unwrap_or(ANSWER_TIMEOUT);
                        return Err(no_answer("checkpoint", d));
                    }
                    // A pong whose write the call's bound cut.
                    (Fail::SendTimedOut, Some(d)) => return Err(no_answer("checkpoint", d)),
                    // A pong that did not leave whole.
                    (Fail::SendFailed, _) | (Fail::SendTimedOut, None) => "write failed".into(),
                };
                Err(Error::new(
                    ErrorCode::Unavailable,
                    format!("protocol: connection lost: {why}"),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::borrow::Cow;

    #[test]
    fn heads_are_shortest() {
        let cases: [(u64, &[u8]); 9] = [
            (0, &[0x00]),
            (23, &[0x17]),
            (24, &[0x18, 24]),
            (255, &[0x18, 0xff]),
            (256, &[0x19, 1, 0]),
            (65535, &[0x19, 0xff, 0xff]),
            (65536, &[0x1a, 0, 1, 0, 0]),
            (1 << 32, &[0x1b, 0, 0, 0, 1, 0, 0, 0, 0]),
            (
                u64::MAX,
                &[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            ),
        ];
        for (n, want) in cases {
            let mut b = Vec::new();
            head(&mut b, 0, n);
            assert_eq!(b, want, "{n}");
        }
        let mut b = Vec::new();
        int(&mut b, i64::MIN);
        assert_eq!(b, [0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn params_decode_back() {
        let msgs = [json!({"a": 1}), json!("x")];
        let state = json!({"s": [1.5]});
        let r = CheckpointRequest {
            run_id: "r".into(),
            session_id: Some("s".into()),
            turn: -5,
            new_messages: Cow::Borrowed(&msgs),
            usage: crate::Usage {
                input_tokens: 1,
                output_tokens: 1 << 40,
                total_tokens: -3,
                cost: 0.5,
            },
            tool_calls_count: 7,
            state: Some(Cow::Borrowed(&state)),
        };
        let b = checkpoint_params(&r).unwrap();
        let v = decode(&b).unwrap();
        assert_eq!(v.get("run_id"), Some(&Cbor::Text("r".into())));
        assert_eq!(v.get("turn"), Some(&Cbor::Int(-5)));
        assert_eq!(
            v.get("new_messages"),
            Some(&Cbor::Array(vec![
                Cbor::Bytes(br#"{"a":1}"#.to_vec()),
                Cbor::Bytes(br#""x""#.to_vec())
            ]))
        );
        let u = v.get("usage").unwrap();
        assert_eq!(u.get("output_tokens"), Some(&Cbor::Int(1 << 40)));
        assert_eq!(u.get("cost"), Some(&Cbor::Float(0.5)));
        assert_eq!(
            v.get("state"),
            Some(&Cbor::Bytes(br#"{"s":[1.5]}"#.to_vec()))
        );
        let mut nan = r.clone();
        nan.usage.cost = f64::NAN;
        assert!(checkpoint_params(&nan).is_none());
    }

    #[test]
    fn masking_round_trips() {
        for n in [0usize, 1, 3, 4, 7, 8, 9, 125, 126, 8422, 65536] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let mut m = data.clone();
            let key = [1, 2, 3, 250];
            mask(&mut m, key);
            let slow: Vec<u8> = data
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ key[i % 4])
                .collect();
            assert_eq!(m, slow);
        }
    }

    #[test]
    fn answers() {
        // The fast path and the general decoder (the same keys in
        // another order) agree.
        let fast: &[u8] =
            b"\xa2\x62id\x05\x66result\xa2\x6ageneration\x18\x2a\x6dmessage_count\x03";
        let other: &[u8] =
            b"\xa2\x66result\xa2\x6dmessage_count\x03\x6ageneration\x18\x2a\x62id\x05";
        for answer in [fast, other] {
            assert_eq!(
                checkpoint_answer(answer).unwrap().unwrap(),
                CheckpointResult {
                    generation: 42,
                    message_count: 3
                }
            );
        }
        let err = b"\xa2\x62id\x05\x65error\xa2\x64code\x69not_found\x67message\x63abc";
        let e = checkpoint_answer(err).unwrap().unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (ErrorCode::NotFound, "abc"));
        assert!(checkpoint_answer(b"\xa1\x62id\x05").is_err());
        assert!(checkpoint_answer(b"\xff").is_err());
        assert!(decode(b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
    }

    /// A fake daemon on `dir`'s default socket that answers every upgrade
    /// request with `answer(request)` and counts the bytes a client sends
    /// after it (in the second half of the returned pair: requests seen).
    fn fake_daemon(
        dir: &Path,
        answer: fn(&str) -> String,
    ) -> std::sync::Arc<Mutex<(Vec<String>, usize)>> {
        use std::os::unix::net::UnixListener;
        let l = UnixListener::bind(dir.join(".cairn/cairnd.sock")).unwrap();
        let seen = std::sync::Arc::new(Mutex::new((Vec::new(), 0)));
        let s2 = seen.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { return };
                c.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let mut req = Vec::new();
                let mut chunk = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&chunk[..n]),
                    }
                }
                let req = String::from_utf8_lossy(&req).into_owned();
                if req.starts_with("GET ") {
                    let _ = c.write_all(answer(&req).as_bytes());
                }
                let mut after = 0;
                while let Ok(n) = c.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    after += n;
                }
                let mut g = s2.lock().unwrap();
                g.0.push(req);
                g.1 += after;
            }
        });
        seen
    }

    fn accept_of(req: &str, salt: &str) -> String {
        let key = req
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap();
        let mut k = format!("{key}{salt}").into_bytes();
        k.extend_from_slice(GUID);
        crate::base64::encode(&crate::sha1::digest(&k))
    }

    #[test]
    fn the_upgrade_is_verified() {
        // A wrong accept, no subprotocol, a 503: the dial fails, nothing is
        // sent after the upgrade request, the call is left to libcairn
        // (None), and within the retry gap the path does not dial again.
        let answers: [fn(&str) -> String; 3] = [
            |req| {
                format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: cairn.v1\r\n\r\n",
                    accept_of(req, "x")
                )
            },
            |req| {
                format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                    accept_of(req, "")
                )
            },
            |_| "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n".into(),
        ];
        let msgs = [json!({"role": "user"})];
        let r = turn_one(&msgs);
        for (i, answer) in answers.into_iter().enumerate() {
            let dir = std::env::temp_dir().join(format!("crs-up-{}-{i}", std::process::id()));
            std::fs::create_dir_all(dir.join(".cairn")).unwrap();
            let seen = fake_daemon(&dir, answer);
            let w = Wire::new(Some(dir.clone()), None);
            assert!(w.checkpoint(&r, &|| None).unwrap().is_none(), "answer {i}");
            assert!(w.checkpoint(&r, &|| None).unwrap().is_none(), "answer {i}");
            w.close();
            // The fake daemon serves connections in turn, so once it has
            // counted a last one of the test's own, it has counted every
            // dial the path made (each closed by the path already).
            let mut last = UnixStream::connect(dir.join(".cairn/cairnd.sock")).unwrap();
            last.write_all(b"LAST\r\n\r\n").unwrap();
            drop(last);
            let deadline = Instant::now() + Duration::from_secs(5);
            while !seen.lock().unwrap().0.iter().any(|r| r.starts_with("LAST")) {
                assert!(Instant::now() < deadline, "the fake daemon did not count");
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut g = seen.lock().unwrap();
            g.0.pop();
            assert_eq!(g.0.len(), 1, "answer {i}: one dial within the retry gap");
            assert!(g.0[0].starts_with("GET / HTTP/1.1\r\n"));
            assert!(g.0[0].contains("\r\nSec-WebSocket-Protocol: cairn.v1\r\n"));
            assert_eq!(g.1, 0, "answer {i}: nothing sent after a refused upgrade");
            assert_eq!(w.sent(), 0);
            drop(g);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    /// Turn 1 of run "r" with `msgs`, and nothing else.
    fn turn_one(msgs: &[Value]) -> CheckpointRequest<'_> {
        CheckpointRequest {
            run_id: "r".into(),
            session_id: None,
            turn: 1,
            new_messages: Cow::Borrowed(msgs),
            usage: crate::Usage::default(),
            tool_calls_count: 0,
            state: None,
        }
    }

    /// A fake daemon's first connection on `l` with its upgrade request
    /// read, and cairnd's answer to that request (not sent); None when the
    /// client went away first.
    fn accept_upgrade(l: &std::os::unix::net::UnixListener) -> Option<(UnixStream, String)> {
        let (mut c, _) = l.accept().ok()?;
        let mut req = Vec::new();
        let mut b = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut b) {
                Ok(0) | Err(_) => return None,
                Ok(n) => req.extend_from_slice(&b[..n]),
            }
        }
        let answer = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: cairn.v1\r\n\r\n",
            accept_of(&String::from_utf8_lossy(&req), "")
        );
        Some((c, answer))
    }

    /// Sleeps for `d` in short steps; false as soon as `stop` is set.
    fn pause(stop: &std::sync::atomic::AtomicBool, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if stop.load(Ordering::Acquire) {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    }

    #[test]
    fn a_full_backlog_fails_the_dial_at_once() {
        // A listener that accepts nothing, with a backlog of 0: once its
        // queue is full, std's connect would wait for ever. The dial
        // fails at once instead (lost: the call goes to libcairn).
        if !RAW_UNIX_CONNECT {
            eprintln!("not run: std's connect on this system, which waits");
            return;
        }
        use super::unix_connect::{SockaddrUn, unix_socket};
        use std::os::fd::AsRawFd;
        unsafe extern "C" {
            fn bind(fd: std::ffi::c_int, addr: *const SockaddrUn, len: u32) -> std::ffi::c_int;
            fn listen(fd: std::ffi::c_int, backlog: std::ffi::c_int) -> std::ffi::c_int;
        }
        let dir = std::env::temp_dir().join(format!("crs-backlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cairnd.sock");
        let l = unix_socket().unwrap();
        let addr = SockaddrUn::new(&path).unwrap();
        // SAFETY: addr is a whole sockaddr_un; l is an open socket.
        let len = size_of::<SockaddrUn>() as u32;
        assert_eq!(unsafe { bind(l.as_raw_fd(), &addr, len) }, 0, "bind");
        assert_eq!(unsafe { listen(l.as_raw_fd(), 0) }, 0, "listen");
        let mut queued = Vec::new();
        let full = loop {
            match connect_now(&path) {
                Ok(s) => queued.push(s),
                Err(e) => break e,
            }
            assert!(
                queued.len() < 64,
                "64 connects to a backlog of 0, none refused"
            );
        };
        assert_eq!(full.kind(), ErrorKind::WouldBlock, "{full}");
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let bounds = Bounds::new(Some(Duration::from_millis(300)));
            let _ = tx.send(Conn::dial(&p, bounds, None).err());
        });
        let got = rx.recv_timeout(Duration::from_secs(10));
        drop(queued);
        std::fs::remove_dir_all(&dir).unwrap();
        let got = got.expect("the dial to a full backlog still waiting after 10 s");
        assert!(matches!(got, Some(Fail::Lost(_))), "{got:?}");
    }

    #[test]
    fn the_dial_is_bounded_whole() {
        // A daemon that answers the upgrade a byte every 50 ms keeps each
        // read well within the dial's bound: the dial still ends once the
        // bound passes, as one deadline covers the upgrade and the hello.
        use std::os::unix::net::UnixListener;
        let dir = std::env::temp_dir().join(format!("crs-dial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        let l = UnixListener::bind(&path).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let server = std::thread::spawn(move || {
            let Some((mut c, answer)) = accept_upgrade(&l) else {
                return;
            };
            for byte in answer.as_bytes() {
                if !pause(&stop2, Duration::from_millis(50)) || c.write_all(&[*byte]).is_err() {
                    return;
                }
            }
        });
        let bounds = Bounds::new(Some(Duration::from_millis(300)));
        let start = Instant::now();
        let r = Conn::dial(&path, bounds, None);
        let took = start.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Release);
        server.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            matches!(r, Err(Fail::ReadTimedOut)),
            "the dial gave {:?}",
            r.err()
        );
        assert!(
            (Duration::from_millis(300)..Duration::from_secs(3)).contains(&took),
            "the dial took {took:?}"
        );
    }

    #[test]
    fn a_call_timeout_bounds_the_whole_call() {
        // A call timeout bounds a checkpoint as a whole, as libcairn's
        // does: the dial, the write and the answer share one deadline. A
        // daemon that answers the hello after 1.4 s, or reads a 4 MiB
        // request only after 1.4 s, and then never answers, fails the call
        // at 1.5 s, not at the time those took plus another 1.5 s (2.9 s
        // at least: the limit is just below, which leaves a loaded machine
        // 1.3 s).
        use std::os::unix::net::UnixListener;
        use std::sync::atomic::AtomicBool;
        let bound = Duration::from_millis(1500);
        let slowness = Duration::from_millis(1400);
        for slow in ["hello", "read"] {
            let dir = std::env::temp_dir().join(format!("crs-call-{}-{slow}", std::process::id()));
            std::fs::create_dir_all(dir.join(".cairn")).unwrap();
            let l = UnixListener::bind(dir.join(".cairn/cairnd.sock")).unwrap();
            let stop = std::sync::Arc::new(AtomicBool::new(false));
            let stop2 = stop.clone();
            let server = std::thread::spawn(move || {
                let Some((mut c, up)) = accept_upgrade(&l) else {
                    return;
                };
                let mut b = vec![0u8; 1 << 20];
                if c.write_all(up.as_bytes()).is_err() || c.read(&mut b[..64]).is_err() {
                    return; // the hello: a few dozen bytes
                }
                if slow == "hello" && !pause(&stop2, slowness) {
                    return;
                }
                let mut hello = ANSWER_ID.to_vec();
                hello.push(1);
                text(&mut hello, "result");
                hello.push(0xa0);
                let mut frame = vec![0x82, hello.len() as u8];
                frame.extend_from_slice(&hello);
                if c.write_all(&frame).is_err() {
                    return;
                }
                if slow == "read" && !pause(&stop2, slowness) {
                    return;
                }
                // Read all, answer nothing.
                c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
                while pause(&stop2, Duration::ZERO) {
                    if let Ok(0) = c.read(&mut b) {
                        return;
                    }
                }
            });
            let w = Wire::new(Some(dir.clone()), Some(bound));
            let n = if slow == "read" { 4 << 20 } else { 10 };
            let msgs = [json!({"content": "x".repeat(n)})];
            let r = turn_one(&msgs);
            let start = Instant::now();
            let got = w.checkpoint(&r, &|| None);
            let took = start.elapsed();
            w.close();
            stop.store(true, Ordering::Release);
            server.join().unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            let e = got.expect_err(slow);
            assert_eq!(e.code, ErrorCode::Unavailable, "{slow}: {e}");
            assert!(e.message.contains("within 1.5s"), "{slow}: {e}");
            assert_eq!(w.sent(), 1, "{slow}");
            assert!(
                (bound..slowness + bound - Duration::from_millis(100)).contains(&took),
                "{slow}: the checkpoint failed after {took:?}"
            );
        }
    }

    #[cfg(target_os = "linux")]
    unsafe extern "C" {
        fn signal(sig: std::ffi::c_int, handler: extern "C" fn(std::ffi::c_int)) -> usize;
        fn pthread_kill(
            thread: std::os::unix::thread::RawPthread,
            sig: std::ffi::c_int,
        ) -> std::ffi::c_int;
    }

    #[cfg(target_os = "linux")]
    extern "C" fn on_signal(_: std::ffi::c_int) {}

    #[cfg(target_os = "linux")]
    #[test]
    fn a_signal_does_not_end_a_wait() {
        // A host's signal (SIGUSR2 here, with a handler that does nothing;
        // libcairn's Go runtime handles only the synchronous signals and
        // SIGPIPE in a C host) interrupts the poll of a bounded wait every
        // 20 ms: the wait still lasts its bound and says nothing is ready,
        // rather than ending early as ready, which would leave the caller
        // to wait under the socket's own timeout.
        use std::os::unix::thread::JoinHandleExt;
        const SIGUSR2: std::ffi::c_int = 12;
        // SAFETY: on_signal does nothing, so it is async-signal-safe.
        unsafe { signal(SIGUSR2, on_signal) };
        let (a, _b) = UnixStream::pair().unwrap();
        let waiter = std::thread::spawn(move || {
            let start = Instant::now();
            (
                ready_by(&a, POLLIN, start + Duration::from_millis(400)),
                start.elapsed(),
            )
        });
        let t = waiter.as_pthread_t();
        while !waiter.is_finished() {
            std::thread::sleep(Duration::from_millis(20));
            if !waiter.is_finished() {
                // SAFETY: the thread has not been joined, so t is alive.
                unsafe { pthread_kill(t, SIGUSR2) };
            }
        }
        let (ready, took) = waiter.join().unwrap();
        assert!(!ready, "ready after {took:?}, with nothing to read");
        assert!(took >= Duration::from_millis(400), "gave up after {took:?}");
    }

    #[test]
    fn go_durations() {
        let cases: [(u64, &str); 16] = [
            (0, "0s"),
            (1, "1ms"),
            (400, "400ms"),
            (999, "999ms"),
            (1000, "1s"),
            (1005, "1.005s"),
            (1500, "1.5s"),
            (59_990, "59.99s"),
            (60_000, "1m0s"),
            (90_250, "1m30.25s"),
            (300_000, "5m0s"),
            (3_599_999, "59m59.999s"),
            (3_600_000, "1h0m0s"),
            (3_723_004, "1h2m3.004s"),
            (86_400_000, "24h0m0s"),
            (90_061_100, "25h1m1.1s"),
        ];
        for (ms, want) in cases {
            assert_eq!(go_duration(Duration::from_millis(ms)), want, "{ms}ms");
        }
        assert_eq!(go_duration(ANSWER_TIMEOUT), "5m0s");
        let e = no_answer("checkpoint", Duration::from_millis(400));
        assert_eq!(e.code, ErrorCode::Unavailable);
        assert_eq!(
            e.message,
            "protocol: no answer to checkpoint from cairnd within 400ms: the outcome is \
             unknown (a request that reached the daemon may still be carried out)"
        );
    }

    #[test]
    fn bounds_follow_the_call_timeout() {
        let b = Bounds::new(None);
        assert_eq!(
            (b.connect, b.send, b.answer, b.whole_write),
            (CONNECT_TIMEOUT, SEND_TIMEOUT, Some(ANSWER_TIMEOUT), false)
        );
        // Zero: no bound on the answer; the dial and the send as without a
        // call timeout.
        let b = Bounds::new(Some(Duration::ZERO));
        assert_eq!(
            (b.connect, b.send, b.answer, b.whole_write),
            (CONNECT_TIMEOUT, SEND_TIMEOUT, None, false)
        );
        let w = Wire::new(None, Some(Duration::ZERO));
        assert_eq!(w.bounds.call_timeout(), None);
        assert_eq!(w.bounds.answer, None);
        let d = Duration::from_millis(400);
        let b = Bounds::new(Some(d));
        assert_eq!(
            (b.connect, b.send, b.answer, b.whole_write),
            (d, d, Some(d), true)
        );
        assert_eq!(Wire::new(None, Some(d)).bounds.call_timeout(), Some(d));
        let d = Duration::from_secs(3600);
        let b = Bounds::new(Some(d));
        assert_eq!((b.connect, b.send, b.answer), (d, d, Some(d)));
    }

    #[test]
    fn socket_path_rules() {
        let root = std::env::temp_dir().join(format!("crs-wsp-{}", std::process::id()));
        let ws = root.join("w");
        std::fs::create_dir_all(ws.join(".cairn")).unwrap();
        let link = root.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&ws, &link).unwrap();
        let real = std::fs::canonicalize(&ws).unwrap();
        assert_eq!(socket_path(&link), Some(real.join(".cairn/cairnd.sock")));
        std::fs::write(ws.join(".cairn/cairnd.addr"), "/run/x/abc.sock\n").unwrap();
        assert_eq!(socket_path(&ws), Some(PathBuf::from("/run/x/abc.sock")));
        std::fs::write(ws.join(".cairn/cairnd.addr"), "relative.sock").unwrap();
        assert_eq!(socket_path(&ws), None);
        let deep = root.join("d".repeat(100));
        std::fs::create_dir_all(deep.join(".cairn")).unwrap();
        assert_eq!(socket_path(&deep), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
