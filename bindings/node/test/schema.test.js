'use strict';
// The binding against the one schema of the wire (api/schema.json) and its
// fixtures (api/fixtures/<Type>.json, one document per type):
//   - wire.d.ts is what scripts/gen-wire.js makes of the schema today;
//   - every fixture, written as an object literal, type-checks against its
//     type from index.d.ts with tsc --strict (so an unknown field or a
//     missing required one is an error), and a document with an unknown
//     field or without a required one does not;
//   - the client exposes every method of the schema, in index.js and in
//     index.d.ts.
// CAIRN_API_DIR overrides the api directory (default: the repository's).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { cairn, REPO } = require('./helpers');
const { generate, methodsOf, OUT: WIRE } = require('../scripts/gen-wire');

const PKG = path.resolve(__dirname, '..');
const API = process.env.CAIRN_API_DIR || path.join(REPO, 'api');
const SCHEMA = path.join(API, 'schema.json');
const FIXTURES = path.join(API, 'fixtures');

function loadSchema() {
  assert.ok(fs.existsSync(SCHEMA), `${SCHEMA} is missing (go generate ./api makes it)`);
  return JSON.parse(fs.readFileSync(SCHEMA, 'utf8'));
}

// The client member that serves each method, where the name differs: the
// methods take camelCase names, and a subscription is ended (unsubscribe)
// and polled (nextEvent) through its Subscription.
const MEMBER = {
  list: ['Client', 'listSessions'],
  'runtime.check': ['Client', 'runtimeCheck'],
  'runtime.restart': ['Client', 'runtimeRestart'],
  unsubscribe: ['Subscription', 'close'],
  nextEvent: ['Subscription', 'nextEvent'],
};

function memberOf(method) {
  return MEMBER[method] || ['Client', method];
}

function allMethods(schema) {
  return methodsOf(schema).map((m) => m.name);
}

test('wire.d.ts is generated from the current api/schema.json', () => {
  const want = generate(loadSchema());
  const got = fs.readFileSync(WIRE, 'utf8');
  assert.ok(got === want, 'wire.d.ts is stale: run `npm run gen` in bindings/node');
});

test('the client exposes every method of the schema', () => {
  const schema = loadSchema();
  const names = allMethods(schema);
  for (const m of ['changes', 'handoff', 'runtime.check', 'runtime.restart']) assert.ok(names.includes(m), `the schema lists ${m}`);
  const classes = { Client: cairn.Client, Subscription: cairn.Subscription };
  for (const name of names) {
    const [cls, member] = memberOf(name);
    assert.equal(typeof classes[cls].prototype[member], 'function', `${name}: ${cls}.${member} is missing`);
  }
});

/** Runs tsc --noEmit --strict on file; returns its output ('' when clean). */
function tsc(file) {
  const bin = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  assert.ok(fs.existsSync(bin), 'typescript is not installed: run npm ci in bindings/node');
  try {
    execFileSync(
      process.execPath,
      [bin, '--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022', '--module', 'nodenext', '--pretty', 'false', file],
      { encoding: 'utf8', stdio: 'pipe', timeout: 120000 }
    );
    return '';
  } catch (err) {
    return `${err.stdout || ''}${err.stderr || ''}` || String(err);
  }
}

test('every fixture type-checks against index.d.ts (tsc --strict)', (t) => {
  const schema = loadSchema();
  assert.ok(fs.existsSync(FIXTURES), `${FIXTURES} is missing`);
  const files = fs.readdirSync(FIXTURES).filter((f) => f.endsWith('.json')).sort();
  assert.ok(files.length > 0, 'no fixtures');
  const defs = schema.$defs || {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-node-tsc-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));

  let src = `import type * as C from ${JSON.stringify(path.join(PKG, 'index.js'))};\n\n`;
  let negative = null;
  for (const f of files) {
    const type = f.slice(0, -'.json'.length);
    // The d.ts types carry the Go names (wire.d.ts is generated), so every
    // fixture's type is its file name; one the schema does not define has
    // no type to check against.
    assert.ok(Object.prototype.hasOwnProperty.call(defs, type), `fixture ${f}: no type ${type} in the schema, so none in index.d.ts`);
    const doc = JSON.parse(fs.readFileSync(path.join(FIXTURES, f), 'utf8'));
    src += `export const fixture_${type}: C.${type} = ${JSON.stringify(doc, null, 2)};\n\n`;
    const required = defs[type].required || [];
    if (negative === null && required.length > 0 && doc && typeof doc === 'object' && !Array.isArray(doc)) negative = { type, doc, required };
  }
  // The check must be able to fail: an unknown field, and a missing
  // required one, are errors (an unused @ts-expect-error is one too).
  assert.ok(negative, 'no fixture of a type with a required field');
  const unknown = { ...negative.doc, cairn_no_such_field: 1 };
  const missing = { ...negative.doc };
  delete missing[negative.required[0]];
  src += `// @ts-expect-error an unknown field\nexport const unknown_field: C.${negative.type} = ${JSON.stringify(unknown)};\n\n`;
  src += `// @ts-expect-error a missing required field\nexport const missing_field: C.${negative.type} = ${JSON.stringify(missing)};\n\n`;
  // index.d.ts declares a member for every method.
  const members = allMethods(schema).map((m) => {
    const [cls, member] = memberOf(m);
    return `  C.${cls}[${JSON.stringify(member)}],\n`;
  });
  src += `export type EveryMethod = [\n${members.join('')}];\n`;

  const file = path.join(dir, 'fixtures.ts');
  fs.writeFileSync(file, src);
  const out = tsc(file);
  assert.equal(out, '', `tsc found errors in ${files.length} fixtures:\n${out}`);
});
