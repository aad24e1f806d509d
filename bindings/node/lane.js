'use strict';
// The fast lane's worker thread (see "How a call travels" in index.js).
//
// It runs one call at a time with cairn_call, synchronously. Entering Go
// from this thread is cheap (about 4 us): Go still re-reads the stack
// bounds of a thread koffi entered from its own stack, but for a thread
// other than the main one glibc's pthread_getattr_np reads them from the
// thread descriptor instead of parsing /proc/self/maps.
//
// Shared memory layout (all offsets in bytes; see LAYOUT in index.js):
//   ctl   Int32Array at 0: [0] state, [1] request length, [2] rc, [3] ready
//   handle Float64 at 16
//   out   at 64: response pointer, response length, error pointer (8 each)
//   method at 96 (NUL-terminated, up to 127 bytes)
//   request at 256 to the end
// States: 0 idle, 1 submitted (the main thread spins), 2 done, 3 submitted
// and detached (the main thread stopped spinning: post a message when done).

const { workerData, parentPort } = require('worker_threads');
const koffi = require(workerData.koffiPath);

const lib = koffi.load(workerData.libPath);
const call = lib.func(
  'int cairn_call(uint64_t handle, const uint8_t *method, const uint8_t *request, size_t request_len, void *response, void *response_len, void *err)'
);

// sched_yield keeps the idle spin from starving the main thread when both
// share a core (see loadYield in index.js).
let schedYield = () => 0;
for (const name of process.platform === 'darwin' ? ['libSystem.B.dylib'] : ['libc.so.6', 'libc.so']) {
  try {
    schedYield = koffi.load(name).func('int sched_yield(void)');
    break;
  } catch (_) {
    // try the next name
  }
}

const sab = workerData.sab;
const idleSpinUs = workerData.idleSpinUs;
const ctl = new Int32Array(sab, 0, 8);
const handle = new Float64Array(sab, 16, 1);
const mem = Buffer.from(sab);
const outResp = mem.subarray(64, 72);
const outLen = mem.subarray(72, 80);
const outErr = mem.subarray(80, 88);
const method = mem.subarray(96, 224);
const request = mem.subarray(256);

const S_SUBMITTED = 1;
const S_DONE = 2;
const S_DETACHED = 3;

function nowUs() {
  return performance.now() * 1000;
}

Atomics.store(ctl, 3, 1);
Atomics.notify(ctl, 3);

for (;;) {
  let s = Atomics.load(ctl, 0);
  if (s !== S_SUBMITTED && s !== S_DETACHED) {
    // Stay hot a little while for the next call of a sequential caller,
    // then sleep until the main thread posts one.
    if (idleSpinUs > 0) {
      const until = nowUs() + idleSpinUs;
      while ((s = Atomics.load(ctl, 0)) !== S_SUBMITTED && s !== S_DETACHED) {
        schedYield();
        if (nowUs() > until) break;
      }
    }
    while ((s = Atomics.load(ctl, 0)) !== S_SUBMITTED && s !== S_DETACHED) Atomics.wait(ctl, 0, s);
  }
  const rc = call(handle[0], method, request, ctl[1], outResp, outLen, outErr);
  ctl[2] = rc;
  if (Atomics.compareExchange(ctl, 0, S_SUBMITTED, S_DONE) !== S_SUBMITTED) {
    // Detached: the main thread waits for this message.
    Atomics.store(ctl, 0, S_DONE);
    parentPort.postMessage(0);
  }
}
