// The ES module entry of cairn-sessions/langgraph: it re-exports the
// CommonJS module, so both share one loaded libcairn in a process.
import m from './langgraph.js';

export default m;
export const { CairnSaver, KIND_CHECKPOINT, KIND_WRITES, KIND_BLOB, KIND_LATEST, KIND_NAMESPACES } = m;
