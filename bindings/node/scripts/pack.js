'use strict';
// Builds the npm package cairn-sessions with its native parts: `make dist-node`.
//
//   node scripts/pack.js --lib build/libcairn.so --daemon build/cairnd \
//     --license LICENSE --goos linux --goarch amd64 --out dist/npm
//
// Copies the package's files (package.json "files") into a staging
// directory, adds native/<platform>-<arch>/{libcairn.so,cairnd} for the
// platform the binaries were built for (Go's GOOS/GOARCH named as Node's
// process.platform/process.arch, which index.js looks up at load time) and
// the LICENSE, then runs `npm pack --pack-destination <out>`. Prints the
// path of the .tgz.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const PLATFORMS = { linux: 'linux', darwin: 'darwin', windows: 'win32', freebsd: 'freebsd' };
const ARCHES = { amd64: 'x64', arm64: 'arm64', '386': 'ia32', arm: 'arm', ppc64le: 'ppc64', s390x: 's390x', riscv64: 'riscv64' };

function args(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`usage: pack.js --lib F --daemon F --license F --goos OS --goarch ARCH --out DIR (at ${argv[i]})`);
    a[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['lib', 'daemon', 'license', 'goos', 'goarch', 'out']) {
    if (!a[k]) throw new Error(`pack.js: --${k} is required`);
  }
  return a;
}

function main() {
  const a = args(process.argv.slice(2));
  const platform = PLATFORMS[a.goos];
  const arch = ARCHES[a.goarch];
  if (!platform || !arch) throw new Error(`pack.js: no Node.js name for GOOS=${a.goos} GOARCH=${a.goarch}`);
  const pkgDir = path.resolve(__dirname, '..');
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  const out = path.resolve(a.out);
  fs.mkdirSync(out, { recursive: true });
  for (const f of fs.readdirSync(out)) {
    if (f.startsWith(`${pkg.name}-`) && f.endsWith('.tgz')) fs.rmSync(path.join(out, f));
  }

  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-npm-'));
  try {
    fs.copyFileSync(path.join(pkgDir, 'package.json'), path.join(stage, 'package.json'));
    for (const f of pkg.files) {
      const src = path.join(pkgDir, f);
      if (fs.existsSync(src) && fs.statSync(src).isFile()) fs.copyFileSync(src, path.join(stage, f));
    }
    fs.copyFileSync(path.resolve(a.license), path.join(stage, 'LICENSE'));
    const native = path.join(stage, 'native', `${platform}-${arch}`);
    fs.mkdirSync(native, { recursive: true });
    const libName = path.basename(a.lib);
    const daemonName = path.basename(a.daemon);
    fs.copyFileSync(path.resolve(a.lib), path.join(native, libName));
    fs.copyFileSync(path.resolve(a.daemon), path.join(native, daemonName));
    // npm keeps a file's executable bits in the tarball; libcairn finds
    // cairnd next to itself and execs it.
    fs.chmodSync(path.join(native, libName), 0o755);
    fs.chmodSync(path.join(native, daemonName), 0o755);

    const res = execFileSync('npm', ['pack', '--json', '--pack-destination', out], {
      cwd: stage,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [info] = JSON.parse(res);
    const tgz = path.join(out, info.filename);
    const names = info.files.map((f) => f.path);
    for (const want of [`native/${platform}-${arch}/${libName}`, `native/${platform}-${arch}/${daemonName}`, 'index.mjs', 'run.js', 'checkpoint-wire.js', 'langgraph.js', 'langgraph.mjs', 'langgraph.d.ts', 'langgraph.d.mts', 'LICENSE']) {
      if (!names.includes(want)) throw new Error(`pack.js: ${tgz} lacks ${want}`);
    }
    console.log(tgz);
  } finally {
    fs.rmSync(stage, { recursive: true, force: true });
  }
}

try {
  main();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
