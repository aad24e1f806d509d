package daemon

import (
	"context"
	"fmt"
	"os"
	"time"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
)

// handler serves one method: it decodes params, calls the backend and
// returns the result to encode.
type handler func(ctx context.Context, c *wsConn, params cbor.RawMessage) (any, error)

// route is one method's handler, typed by its api.Spec so the compiler
// checks the params and result against the method table.
type route struct {
	name string
	h    handler
}

func handle[P, R any](m api.Spec[P, R], fn func(ctx context.Context, c *wsConn, p P) (R, error)) route {
	return route{m.Name, func(ctx context.Context, c *wsConn, params cbor.RawMessage) (any, error) {
		var p P
		// A checkpoint, every agent turn, is decoded without reflection
		// when it has the layout the protocol client writes.
		if cp, ok := any(&p).(*api.CheckpointRequest); !ok || !protocol.DecodeCheckpointParams(params, cp) {
			if err := protocol.DecodeParams(params, &p); err != nil {
				return nil, err
			}
		}
		return fn(ctx, c, p)
	}}
}

// backend routes a method to the Backend method of the same shape.
func backend[P, R any](m api.Spec[P, R], fn func(Backend, context.Context, P) (R, error)) route {
	return handle(m, func(ctx context.Context, c *wsConn, p P) (R, error) { return fn(c.s.cfg.Backend, ctx, p) })
}

// handlers maps every method of api.Methods to its handler; routes panics
// at start-up if one is missing or unknown.
var handlers = routes(
	handle(api.Hello, hello),
	handle(api.Status, func(_ context.Context, c *wsConn, _ api.Empty) (api.StatusResult, error) { return c.s.status(), nil }),
	handle(api.Subscribe, subscribe(true)),
	handle(api.Unsubscribe, subscribe(false)),
	backend(api.Save, Backend.Save),
	backend(api.ResumeSession, Backend.ResumeSession),
	backend(api.Summary, Backend.Summary),
	backend(api.Messages, Backend.Messages),
	backend(api.Artifact, Backend.Artifact),
	backend(api.Artifacts, Backend.Artifacts),
	backend(api.ArtifactsByID, Backend.ArtifactsByID),
	backend(api.Run, Backend.Run),
	backend(api.Runs, Backend.Runs),
	backend(api.RunEvents, Backend.RunEvents),
	backend(api.BeginRun, Backend.BeginRun),
	backend(api.Checkpoint, Backend.Checkpoint),
	backend(api.CompleteRun, Backend.CompleteRun),
	backend(api.ResumeRun, Backend.ResumeRun),
	backend(api.BeginWorkflow, Backend.BeginWorkflow),
	backend(api.CompleteStep, Backend.CompleteStep),
	backend(api.FinishWorkflow, Backend.FinishWorkflow),
	backend(api.List, Backend.List),
	backend(api.Delete, Backend.Delete),
	backend(api.Fork, Backend.Fork),
	backend(api.Export, Backend.Export),
	backend(api.Import, Backend.Import),
	backend(api.ExportFile, Backend.ExportFile),
	backend(api.ImportFile, Backend.ImportFile),
	backend(api.Verify, Backend.Verify),
	backend(api.Repair, Backend.Repair),
	handle(api.Changes, changes),
	backend(api.Handoff, Backend.Handoff),
	backend(api.RuntimeCheck, Backend.RuntimeCheck),
	backend(api.RuntimeRestart, Backend.RuntimeRestart),
)

// routes builds the dispatch table, checking that it serves exactly the
// methods of api.Methods.
func routes(rs ...route) map[string]handler {
	m := make(map[string]handler, len(rs))
	names := make([]string, len(rs))
	for i, r := range rs {
		m[r.name], names[i] = r.h, r.name
	}
	if err := api.CheckServed(names, api.Methods); err != nil {
		panic("daemon: " + err.Error())
	}
	return m
}

func changes(ctx context.Context, c *wsConn, p api.ChangesParams) (api.ChangeSet, error) {
	tr := c.s.cfg.Files
	if tr == nil {
		return api.ChangeSet{}, &protocol.RemoteError{Method: api.Changes.Name, Code: api.CodeUnavailable, Message: "this daemon does not track the workspace"}
	}
	return tr.Changes(ctx, p.Since)
}

func hello(_ context.Context, c *wsConn, p api.HelloParams) (api.HelloResult, error) {
	s := c.s
	if p.Client != "" {
		c.log.Debug("hello", "client", truncate(p.Client, 64), "protocol_version", p.ProtocolVersion)
	}
	return api.HelloResult{
		ServerVersion:   s.cfg.Version,
		ProtocolVersion: api.ProtocolVersion,
		Workspace:       s.cfg.Workspace,
		PID:             os.Getpid(),
		Capabilities: api.HelloCapabilities{
			Store:   s.cfg.Backend.Capabilities(),
			Methods: api.MethodNames(),
			Events:  api.EventNames(),
		},
		Limits: protocol.DefaultLimits(s.cfg.MaxMessageSize),
	}, nil
}

func subscribe(add bool) func(context.Context, *wsConn, api.SubscribeParams) (api.SubscribeResult, error) {
	return func(_ context.Context, c *wsConn, p api.SubscribeParams) (api.SubscribeResult, error) {
		if err := protocol.CheckEvents(p.Events); err != nil {
			return api.SubscribeResult{}, err
		}
		return api.SubscribeResult{Events: c.s.events.update(c, add, p.Events)}, nil
	}
}

// truncate shortens client-supplied text before it reaches a log or
// message: to at most n bytes, cut at a character boundary so that valid
// UTF-8 stays valid, followed by "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// uptime is time since start in milliseconds.
func uptime(start time.Time) int64 { return time.Since(start).Milliseconds() }

// maxEchoedMethod is how many bytes of an unknown method's name its
// method_not_found answer echoes (PROTOCOL.md §7).
const maxEchoedMethod = 64

// methodNotFound is the error for an unknown method.
func methodNotFound(method string) error {
	return fmt.Errorf("%w: no method %q", protocol.ErrMethodNotFound, truncate(method, maxEchoedMethod))
}
