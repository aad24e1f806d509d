'use strict';
// The Node.js saver's getTuple of the latest checkpoint, embedded: 200 puts
// (each with its writes), then 2,000 getTuple calls; median and CPU per call.
// Compares two builds of the package in one sitting (make node-deps first):
//
//   CAIRN_LIBRARY=<libcairn.so> node bench/adapters/node_gettuple.js <dir with index.js and langgraph.js> [label]
const path = require('path');
const fs = require('fs');
const os = require('os');
const dir = path.resolve(process.argv[2]);
const Module = require('module');
// The framework package comes from this checkout's bindings/node.
const req = Module.createRequire(path.join(__dirname, '..', '..', 'bindings', 'node', 'index.js'));
const origResolve = Module._resolveFilename;
Module._resolveFilename = function (r, parent, ...rest) {
  try { return origResolve.call(this, r, parent, ...rest); } catch (e) { return req.resolve(r); }
};
const cairn = require(path.join(dir, 'index.js'));
const { CairnSaver } = require(path.join(dir, 'langgraph.js'));
(async () => {
  const { emptyCheckpoint, uuid6 } = await import(req.resolve('@langchain/langgraph-checkpoint'));
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'nb-'));
  const c = await cairn.connect({ workspace: ws, embedded: true });
  const saver = new CairnSaver({ client: c });
  let config = { configurable: { thread_id: 't', checkpoint_ns: '' } };
  for (let n = 0; n < 200; n++) {
    const cp = { ...emptyCheckpoint(), id: uuid6(n), channel_values: { a: n, b: 'hello world' }, channel_versions: { a: n + 1, b: 1 } };
    config = await saver.put(config, cp, { source: 'loop', step: n, parents: {} }, n === 0 ? { a: 1, b: 1 } : { a: n + 1 });
    await saver.putWrites(config, [['a', n]], `task-${n}`);
  }
  const ts = [];
  const c0 = process.cpuUsage();
  for (let i = 0; i < 2000; i++) {
    const t = process.hrtime.bigint();
    await saver.getTuple({ configurable: { thread_id: 't' } });
    ts.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  const cu = process.cpuUsage(c0);
  ts.sort((a, b) => a - b);
  console.log(`${process.argv[3]} getTuple median ${ts[1000].toFixed(1)} us, cpu ${((cu.user + cu.system) / 2000).toFixed(1)} us`);
  await c.close();
  fs.rmSync(ws, { recursive: true, force: true });
})();
