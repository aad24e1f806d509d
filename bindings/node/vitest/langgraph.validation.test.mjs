// The official @langchain/langgraph-checkpoint-validation suite against
// CairnSaver, embedded and through a daemon. Its CLI fails in 1.1.1 (even
// on MemorySaver), so its validate() runs here under vitest.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { validate } from '@langchain/langgraph-checkpoint-validation';
import cairn from '../index.js';
import { CairnSaver } from '../langgraph.mjs';
import helpers from '../test/helpers.js';

for (const mode of ['embedded', 'daemon']) {
  let ws;
  let client;
  let pid;
  let n = 0;
  validate({
    checkpointerName: `CairnSaver (${mode})`,
    async beforeAll() {
      ws = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-lg-'));
      client = await cairn.connect(mode === 'embedded' ? { workspace: ws, embedded: true } : helpers.daemonOptions(ws));
      const st = await client.status();
      pid = st.daemon && st.daemon.pid;
      if (mode === 'daemon' && !pid) throw new Error('no daemon pid in status');
    },
    async afterAll() {
      await client.close().catch(() => {});
      await helpers.stopDaemon(pid);
      fs.rmSync(ws, { recursive: true, force: true });
    },
    // A fresh prefix per checkpointer: each one starts with no threads, as
    // the suite expects, while all share one workspace.
    createCheckpointer() {
      n += 1;
      return new CairnSaver({ client, sessionPrefix: `t${n}:` });
    },
  });
}
