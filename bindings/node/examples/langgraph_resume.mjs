// A three-step LangGraph.js graph checkpointed in cairn. Run it, kill it
// (kill -9) while a step is working, and run it again: the new process
// resumes at the step that was cut short; the finished steps do not run
// again. Usage: node langgraph_resume.mjs [workspace]
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { CairnSaver } from 'cairn-sessions/langgraph';

const State = Annotation.Root({
  log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

// A step that takes a while, as a model or tool call does.
function step(name) {
  return async (state) => {
    console.log(`step ${name}: working`);
    await new Promise((r) => setTimeout(r, Number(process.env.STEP_MS ?? 2000)));
    return { log: [`${name} (after ${state.log.length} entries)`] };
  };
}

const graph = new StateGraph(State)
  .addNode('plan', step('plan'))
  .addNode('code', step('code'))
  .addNode('test', step('test'))
  .addEdge(START, 'plan')
  .addEdge('plan', 'code')
  .addEdge('code', 'test')
  .addEdge('test', END);

const saver = await CairnSaver.connect({ workspace: process.argv[2] ?? '.' });
const app = graph.compile({ checkpointer: saver });
// durability "sync": each step's checkpoint is saved before the next step
// starts, so a kill loses at most the step under way.
const config = { configurable: { thread_id: 'demo' }, durability: 'sync' };

const saved = await app.getState(config);
let input = { log: ['start'] };
if (saved.next.length > 0) {
  console.log(`resuming at ${saved.next.join(', ')}`);
  input = null; // invoke(null) continues the thread from its last checkpoint
}
const final = await app.invoke(input, config);
console.log(JSON.stringify(final.log));
await saver.close();
