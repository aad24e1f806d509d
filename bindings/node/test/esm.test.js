'use strict';
// The package's two entries: index.mjs (import) exports every name of
// index.js (require), the same objects; the "exports" map sends `require`
// and `import` of 'cairn-sessions' to each; and TypeScript resolves the
// declarations (the "types" condition) from an ES module and from CommonJS.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { pathToFileURL } = require('url');

const PKG = path.resolve(__dirname, '..');

test('index.mjs exports every name of index.js, the same objects', async () => {
  const cjs = require('../index.js');
  const esm = await import(pathToFileURL(path.join(PKG, 'index.mjs')).href);
  assert.strictEqual(esm.default, cjs, 'the default export is the CommonJS module');
  for (const name of Object.keys(cjs)) {
    assert.ok(name in esm, `index.mjs lacks ${name}`);
    assert.strictEqual(esm[name], cjs[name], `index.mjs's ${name} is not index.js's`);
  }
  for (const name of Object.keys(esm)) {
    if (name !== 'default') assert.ok(name in cjs, `index.mjs exports ${name}, which index.js does not`);
  }
});

test("the exports map sends require and import of 'cairn-sessions' to each entry", async () => {
  // A package may import itself by name (self-reference through "exports").
  assert.strictEqual(require.resolve('cairn-sessions'), path.join(PKG, 'index.js'));
  const r = execFileSync(process.execPath, ['--input-type=module', '-e', "console.log(import.meta.resolve('cairn-sessions'))"], {
    cwd: PKG,
    encoding: 'utf8',
    timeout: 30000,
  });
  assert.strictEqual(r.trim(), pathToFileURL(path.join(PKG, 'index.mjs')).href);
  const esm = await import('cairn-sessions');
  assert.strictEqual(esm.default, require('cairn-sessions'));
});

test('TypeScript resolves the declarations of cairn-sessions from ESM and CommonJS', (t) => {
  const bin = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  assert.ok(fs.existsSync(bin), 'typescript is not installed: run npm ci in bindings/node');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-esm-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // An installed package, as a dependent sees it.
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(PKG, path.join(dir, 'node_modules', 'cairn-sessions'), 'dir');
  fs.writeFileSync(
    path.join(dir, 'a.mts'),
    `import cairn, { connect, NotFoundError, type Client, type Snapshot } from 'cairn-sessions';
export async function f(ws: string): Promise<Snapshot | null> {
  const c: Client = await connect({ workspace: ws });
  try {
    return (await c.resumeSession('s1')).snapshot;
  } catch (e) {
    if (e instanceof NotFoundError) throw e;
    throw new cairn.CairnError('internal', String(e));
  } finally {
    await c.close();
  }
}
// @ts-expect-error: connect takes options, not a string
connect('ws');
`
  );
  fs.writeFileSync(
    path.join(dir, 'b.cts'),
    `import cairn = require('cairn-sessions');
export const lib: string = cairn.libraryPath();
export const p: Promise<cairn.Client> = cairn.connect({ embedded: true });
`
  );
  let out = '';
  try {
    execFileSync(
      process.execPath,
      [bin, '--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022', '--module', 'node16', '--moduleResolution', 'node16',
        '--types', '', '--pretty', 'false', path.join(dir, 'a.mts'), path.join(dir, 'b.cts')],
      { cwd: dir, encoding: 'utf8', stdio: 'pipe', timeout: 120000 }
    );
  } catch (err) {
    out = `${err.stdout || ''}${err.stderr || ''}` || String(err);
  }
  assert.strictEqual(out, '', `tsc found errors:\n${out}`);
});
