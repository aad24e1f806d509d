// Package daemon is cairnd: it serves one workspace's engine over the wire
// protocol (see ../protocol/PROTOCOL.md) on the workspace's Unix socket.
//
// What it guarantees, and the caveats:
//
//   - One daemon per workspace. Run opens the store first; the store's
//     flock is the single-instance lock, so a second daemon fails with the
//     holder's pid before it touches the socket. Only the lock holder
//     removes a stale socket, so a live daemon is never disturbed.
//   - Only the daemon's own uid gets in: the socket is 0600 in a 0700
//     directory, and every accepted connection's SO_PEERCRED uid is checked
//     (Linux; elsewhere the directory permissions are the only guard).
//     Requests with an Origin header (any value, empty included) are
//     refused, which shuts out browsers.
//   - A bad message is answered with a stable error code and never affects
//     another connection; the connection itself goes on unless the framing
//     is lost (a message over the size limit, closed with 1009 as soon as a
//     frame header declares it).
//   - At most protocol.MaxConnections connections, however many upgrades
//     arrive at once: each takes its slot before its 101.
//   - Events never block the engine: each connection has a bounded queue;
//     events that find it full are dropped, counted, and reported to that
//     connection with an events.dropped push.
//   - Memory for unsent answers is bounded across all connections
//     (Config.AnswerBudget): when an answer does not fit, the connection
//     holding the most unsent bytes is closed with status 1008. A frame
//     that stalls mid-way closes its connection after Config.FrameTimeout;
//     idle connections are never closed.
//   - Shutdown answers new requests with "unavailable" and waits for
//     requests in flight (an acknowledged commit is durable) with the
//     socket still open, /healthz answering 503 "stopping"; then it closes
//     the socket and every connection with status 1001.
//
// The daemon never logs message contents: only methods, codes, sizes and
// timings.
package daemon
