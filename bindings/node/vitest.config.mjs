// vitest runs only the LangGraph.js validation suite (vitest/); the
// binding's own tests run under node --test (test/).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['vitest/**/*.test.mjs'],
    globals: true, // the suite calls describe/it/beforeAll as globals
    fileParallelism: false,
    testTimeout: 30000,
    hookTimeout: 30000,
  },
});
