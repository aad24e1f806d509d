package daemon

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/protocol"
)

// handler serves one method: it decodes params, calls the backend and
// returns the result to encode.
type handler func(ctx context.Context, c *wsConn, params cbor.RawMessage) (any, error)

// call adapts a backend method taking a request struct.
func call[Req, Res any](fn func(Backend, context.Context, Req) (Res, error)) handler {
	return func(ctx context.Context, c *wsConn, params cbor.RawMessage) (any, error) {
		var req Req
		if err := protocol.DecodeParams(params, &req); err != nil {
			return nil, err
		}
		return fn(c.s.cfg.Backend, ctx, req)
	}
}

// handlers maps every method of PROTOCOL.md §5 to its handler.
var handlers = map[string]handler{
	protocol.MethodHello:       hello,
	protocol.MethodStatus:      status,
	protocol.MethodSubscribe:   subscribe(true),
	protocol.MethodUnsubscribe: subscribe(false),
	protocol.MethodSave:        call(Backend.Save),
	protocol.MethodResumeSession: call(func(b Backend, ctx context.Context, p protocol.SessionParams) (*engine.ResumeSessionResult, error) {
		return b.ResumeSession(ctx, p.SessionID)
	}),
	protocol.MethodBeginRun:      call(Backend.BeginRun),
	protocol.MethodCheckpoint:    call(Backend.Checkpoint),
	protocol.MethodCompleteRun:   call(Backend.CompleteRun),
	protocol.MethodResumeRun:     call(Backend.ResumeRun),
	protocol.MethodBeginWorkflow: call(Backend.BeginWorkflow),
	protocol.MethodCompleteStep: call(func(b Backend, ctx context.Context, p engine.CompleteStepRequest) (protocol.Empty, error) {
		return protocol.Empty{}, b.CompleteStep(ctx, p)
	}),
	protocol.MethodFinishWorkflow: call(func(b Backend, ctx context.Context, p protocol.WorkflowParams) (protocol.Empty, error) {
		return protocol.Empty{}, b.FinishWorkflow(ctx, p.WorkflowID)
	}),
	protocol.MethodList: call(func(b Backend, ctx context.Context, _ protocol.Empty) (protocol.ListResult, error) {
		l, err := b.List(ctx)
		return protocol.ListResult{Sessions: l}, err
	}),
	protocol.MethodDelete: call(func(b Backend, ctx context.Context, p protocol.SessionParams) (protocol.Empty, error) {
		return protocol.Empty{}, b.Delete(ctx, p.SessionID)
	}),
	protocol.MethodFork: call(Backend.Fork),
	protocol.MethodExport: call(func(b Backend, ctx context.Context, p protocol.SessionParams) (protocol.ExportResult, error) {
		env, err := b.Export(ctx, p.SessionID)
		return protocol.ExportResult{Envelope: env}, err
	}),
	protocol.MethodImport: call(func(b Backend, ctx context.Context, p protocol.ImportParams) (engine.ImportResult, error) {
		return b.Import(ctx, p.Envelope)
	}),
	protocol.MethodChanges:        changes,
	protocol.MethodHandoff:        call(Backend.Handoff),
	protocol.MethodRuntimeCheck:   call(Backend.RuntimeCheck),
	protocol.MethodRuntimeRestart: call(Backend.RuntimeRestart),
}

func changes(ctx context.Context, c *wsConn, params cbor.RawMessage) (any, error) {
	var p protocol.ChangesParams
	if err := protocol.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	tr := c.s.cfg.Files
	if tr == nil {
		return nil, &protocol.RemoteError{Method: protocol.MethodChanges, Code: protocol.CodeUnavailable, Message: "this daemon does not track the workspace"}
	}
	return tr.Changes(ctx, p.Since)
}

func hello(_ context.Context, c *wsConn, params cbor.RawMessage) (any, error) {
	var p protocol.HelloParams
	if err := protocol.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	s := c.s
	if p.Client != "" {
		c.log.Debug("hello", "client", truncate(p.Client, 64), "protocol_version", p.ProtocolVersion)
	}
	return protocol.HelloResult{
		ServerVersion:   s.cfg.Version,
		ProtocolVersion: protocol.ProtocolVersion,
		Workspace:       s.cfg.Workspace,
		PID:             os.Getpid(),
		Capabilities: protocol.HelloCapabilites{
			Store:   s.cfg.Backend.Capabilities(),
			Methods: protocol.Methods(),
			Events:  protocol.Events(),
		},
		Limits: protocol.Limits{
			MaxMessageSize:     s.cfg.MaxMessageSize,
			MaxNestedLevels:    protocol.MaxNestedLevels,
			MaxArrayElements:   protocol.MaxArrayElements,
			MaxMapPairs:        protocol.MaxMapPairs,
			MaxInFlightPerConn: protocol.MaxInFlightPerConn,
			EventQueueLen:      protocol.EventQueueLen,
		},
	}, nil
}

func status(_ context.Context, c *wsConn, params cbor.RawMessage) (any, error) {
	var p protocol.Empty
	if err := protocol.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	return c.s.status(), nil
}

func subscribe(add bool) handler {
	return func(_ context.Context, c *wsConn, params cbor.RawMessage) (any, error) {
		var p protocol.SubscribeParams
		if err := protocol.DecodeParams(params, &p); err != nil {
			return nil, err
		}
		if err := protocol.CheckEvents(p.Events); err != nil {
			return nil, err
		}
		return protocol.SubscribeResult{Events: c.s.events.update(c, add, p.Events)}, nil
	}
}

// truncate shortens client-supplied text before it reaches a log or message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// uptime is time since start in milliseconds.
func uptime(start time.Time) int64 { return time.Since(start).Milliseconds() }

// methodNotFound is the error for an unknown method.
func methodNotFound(method string) error {
	return fmt.Errorf("%w: no method %q", protocol.ErrMethodNotFound, truncate(method, 64))
}
