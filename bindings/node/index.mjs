// The ES module entry of cairn-sessions: `import { connect } from
// 'cairn-sessions'`. It re-exports the CommonJS module (index.js), so both
// entries share one loaded libcairn and one completion pipe in a process.
// test/esm.test.js checks that every name of index.js is exported here.

import cairn from './index.js';

export default cairn;
export const {
  connect,
  version,
  libraryPath,
  openHandles,
  Client,
  Subscription,
  AgentRun,
  CairnError,
  errorClassFor,
  codes,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  ConflictError,
  SchemaUnsupportedError,
  TooLargeError,
  NoCheckpointError,
  NotOwnerError,
  StepIdentityChangedError,
  LockedError,
  UnavailableError,
  ForkedError,
  BadHandleError,
  MethodNotFoundError,
  BadRequestError,
  BadTicketError,
  CorruptError,
  NoSpaceError,
} = cairn;
