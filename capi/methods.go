//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/version"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

// openOptions are cairn_open's options (cairn.h).
type openOptions struct {
	Workspace string `json:"workspace"`
	Embedded  bool   `json:"embedded"`
	Daemon    string `json:"daemon"`
	AutoStart *bool  `json:"auto_start"`
	// DaemonArgs are extra arguments for a daemon this handle starts, such
	// as "--idle-timeout=30s".
	DaemonArgs []string `json:"daemon_args"`
}

// connectTimeout bounds cairn_open in daemon mode, daemon start included.
const connectTimeout = 15 * time.Second

// instance is what a handle refers to: an engine in this process, or a
// client of the workspace's daemon.
type instance struct {
	pid       int
	workspace string
	eng       *engine.Engine     // embedded mode
	files     *workspace.Tracker // embedded mode, when the tree could be tracked
	client    *protocol.Client   // daemon mode

	mu      sync.Mutex
	subs    map[uint64]*subscription
	nextSub uint64
	closed  bool
}

func openInstance(raw string) (*instance, error) {
	var o openOptions
	if len(bytes.TrimSpace([]byte(raw))) > 0 {
		if err := strictDecode([]byte(raw), &o); err != nil {
			return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open options: %v", err)
		}
	}
	if o.Workspace == "" {
		o.Workspace = "."
	}
	ws, err := filepath.Abs(o.Workspace)
	if err != nil {
		return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: workspace: %v", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: workspace %s is not a directory", ws)
	}
	in := &instance{pid: os.Getpid(), workspace: ws, subs: map[uint64]*subscription{}}
	if o.Embedded {
		st, err := fsstore.Open(ws, fsstore.Options{})
		if err != nil {
			var le *session.LockedError
			if errors.As(err, &le) {
				return nil, session.Errorf(session.CodeLocked,
					"embedded mode needs the workspace store to itself, but pid %d holds %s (a cairnd daemon or another embedded process): use daemon mode, or stop that process",
					le.PID, le.Path)
			}
			return nil, err
		}
		eopts := engine.Options{Root: ws}
		// Tracking is best effort, as in the daemon: without it drift is
		// reported as not tracked.
		if tr, err := workspace.Open(ws, workspace.Options{}); err == nil {
			in.files, eopts.Workspace = tr, tr
		}
		in.eng = engine.New(st, eopts)
		return in, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	// The client does not poll for answers in a host process: the host's
	// own threads (an event loop, a worker, an interpreter) need the CPUs,
	// and polling measured slower from Node.js (docs/PERFORMANCE.md).
	popts := &protocol.Options{DaemonPath: o.Daemon, DaemonArgs: o.DaemonArgs, ClientName: "libcairn " + version.Version, PollBudget: -1}
	if o.AutoStart != nil && !*o.AutoStart {
		popts.NoAutoStart = true
	}
	c, err := protocol.Connect(ctx, ws, popts)
	if err != nil {
		return nil, err
	}
	in.client = c
	return in, nil
}

func (in *instance) close() error {
	in.mu.Lock()
	in.closed = true
	subs := in.subs
	in.subs = map[uint64]*subscription{}
	in.mu.Unlock()
	for _, s := range subs {
		s.close()
	}
	if in.eng != nil {
		err := in.eng.Close()
		if in.files != nil {
			err = errors.Join(err, in.files.Close())
		}
		return err
	}
	return in.client.Close()
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// trailing data, so a misspelt parameter is an error rather than ignored.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func decodeParams[P any](b []byte) (P, error) {
	var p P
	if len(bytes.TrimSpace(b)) == 0 {
		return p, nil
	}
	if err := strictDecode(b, &p); err != nil {
		return p, session.Errorf(session.CodeInvalidArgument, "params: %v", err)
	}
	return p, nil
}

// method runs one method in either mode.
type method func(ctx context.Context, in *instance, name string, params []byte) (any, error)

// forward makes a method whose params and result are the same in JSON and on
// the wire: the engine runs it in embedded mode, the daemon otherwise.
func forward[P, R any](local func(*engine.Engine, context.Context, P) (R, error)) method {
	return func(ctx context.Context, in *instance, name string, b []byte) (any, error) {
		p, err := decodeParams[P](b)
		if err != nil {
			return nil, err
		}
		if in.eng != nil {
			return local(in.eng, ctx, p)
		}
		var r R
		err = in.client.Call(ctx, name, p, &r)
		return r, err
	}
}

func noResult[P any](local func(*engine.Engine, context.Context, P) error) method {
	return forward(func(e *engine.Engine, ctx context.Context, p P) (protocol.Empty, error) {
		return protocol.Empty{}, local(e, ctx, p)
	})
}

// exportResult and importParams carry the envelope as JSON itself, not as
// the byte string the wire uses.
type exportResult struct {
	Envelope json.RawMessage `json:"envelope"`
}

type importParams struct {
	Envelope json.RawMessage `json:"envelope"`
}

// statusResult is the result of status through the C API.
type statusResult struct {
	Mode      string                 `json:"mode"` // "embedded" or "daemon"
	Version   string                 `json:"version"`
	Workspace string                 `json:"workspace"`
	PID       int                    `json:"pid"`
	Daemon    *protocol.StatusResult `json:"daemon,omitempty"`
}

var methods = map[string]method{
	"status": func(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
		if _, err := decodeParams[protocol.Empty](b); err != nil {
			return nil, err
		}
		res := statusResult{Mode: "embedded", Version: version.Version, Workspace: in.workspace, PID: in.pid}
		if in.client != nil {
			st, err := in.client.Status(ctx)
			if err != nil {
				return nil, err
			}
			res.Mode, res.Daemon = "daemon", &st
		}
		return res, nil
	},
	"hello": func(ctx context.Context, in *instance, name string, b []byte) (any, error) {
		if _, err := decodeParams[protocol.Empty](b); err != nil {
			return nil, err
		}
		if in.client != nil {
			var r protocol.HelloResult
			err := in.client.Call(ctx, name, protocol.HelloParams{ProtocolVersion: protocol.ProtocolVersion, Client: "libcairn"}, &r)
			return r, err
		}
		return protocol.HelloResult{
			ServerVersion: version.Version, ProtocolVersion: protocol.ProtocolVersion, Workspace: in.workspace, PID: in.pid,
			Capabilities: protocol.HelloCapabilites{Store: in.eng.Capabilities(), Methods: methodNames(), Events: protocol.Events()},
		}, nil
	},
	"save": forward((*engine.Engine).Save),
	"resumeSession": forward(func(e *engine.Engine, ctx context.Context, p protocol.SessionParams) (*engine.ResumeSessionResult, error) {
		return e.ResumeSession(ctx, p.SessionID)
	}),
	"beginRun":      forward((*engine.Engine).BeginRun),
	"checkpoint":    forward((*engine.Engine).Checkpoint),
	"completeRun":   forward((*engine.Engine).CompleteRun),
	"resumeRun":     forward((*engine.Engine).ResumeRun),
	"beginWorkflow": forward((*engine.Engine).BeginWorkflow),
	"completeStep":  noResult((*engine.Engine).CompleteStep),
	"finishWorkflow": noResult(func(e *engine.Engine, ctx context.Context, p protocol.WorkflowParams) error {
		return e.FinishWorkflow(ctx, p.WorkflowID)
	}),
	"list": forward(func(e *engine.Engine, ctx context.Context, _ protocol.Empty) (protocol.ListResult, error) {
		l, err := e.List(ctx)
		return protocol.ListResult{Sessions: l}, err
	}),
	"delete": noResult(func(e *engine.Engine, ctx context.Context, p protocol.SessionParams) error {
		return e.Delete(ctx, p.SessionID)
	}),
	"fork": forward((*engine.Engine).Fork),
	"export": func(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
		p, err := decodeParams[protocol.SessionParams](b)
		if err != nil {
			return nil, err
		}
		var env []byte
		if in.eng != nil {
			env, err = in.eng.Export(ctx, p.SessionID)
		} else {
			env, err = in.client.Export(ctx, p.SessionID)
		}
		return exportResult{Envelope: env}, err
	},
	"import": func(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
		p, err := decodeParams[importParams](b)
		if err != nil {
			return nil, err
		}
		if len(p.Envelope) == 0 {
			return nil, session.Errorf(session.CodeInvalidArgument, "import needs an envelope")
		}
		if in.eng != nil {
			return in.eng.Import(ctx, p.Envelope)
		}
		return in.client.Import(ctx, p.Envelope)
	},
	"changes": func(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
		p, err := decodeParams[protocol.ChangesParams](b)
		if err != nil {
			return nil, err
		}
		if in.client != nil {
			return in.client.Changes(ctx, p.Since)
		}
		if in.files == nil {
			return nil, &codedError{code: string(protocol.CodeUnavailable), msg: "the workspace is not tracked in this process"}
		}
		return in.files.Changes(ctx, p.Since)
	},
	"handoff":         forward((*engine.Engine).Handoff),
	"runtime.check":   forward((*engine.Engine).RuntimeCheck),
	"runtime.restart": forward((*engine.Engine).RuntimeRestart),
	"subscribe":       subscribe,
	"nextEvent":       nextEvent,
	"unsubscribe":     unsubscribe,
}

// methodNames lists the methods of the C API: the protocol's, and
// nextEvent.
func methodNames() []string {
	return append(protocol.Methods(), "nextEvent")
}

func (in *instance) invoke(ctx context.Context, name string, params []byte) (any, error) {
	m := methods[name]
	if m == nil {
		return nil, &codedError{code: string(protocol.CodeMethodNotFound), msg: fmt.Sprintf("no method %q", truncate(name, 64))}
	}
	return m(ctx, in, name, params)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// subscription queues events for nextEvent.
type subscription struct {
	events  <-chan engine.Event
	dropped atomic.Uint64
	stop    func()
	done    chan struct{}
	once    sync.Once
}

func (s *subscription) close() {
	s.once.Do(func() {
		close(s.done)
		s.stop()
	})
}

// eventQueue is how many events a subscription holds for nextEvent before
// it drops (and counts) further ones.
const eventQueue = 1024

type subscribeResult struct {
	Subscription uint64 `json:"subscription"`
}

func subscribe(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
	p, err := decodeParams[protocol.SubscribeParams](b)
	if err != nil {
		return nil, err
	}
	if err := protocol.CheckEvents(p.Events); err != nil {
		return nil, err
	}
	s := &subscription{done: make(chan struct{})}
	if in.eng != nil {
		want := map[string]bool{}
		for _, e := range p.Events {
			want[e] = true
		}
		ch := make(chan engine.Event, eventQueue)
		s.events = ch
		deliver := func(ev engine.Event) {
			if len(want) > 0 && !want[ev.Type] {
				return
			}
			select {
			case ch <- ev:
			default:
				s.dropped.Add(1)
			}
		}
		stopEngine := in.eng.Subscribe(deliver)
		s.stop = stopEngine
		if in.files != nil {
			stopFiles := in.files.Subscribe(func(path, kind string) {
				deliver(engine.Event{Type: protocol.EventFileChanged, Data: map[string]any{"path": path, "kind": kind}})
			})
			s.stop = func() { stopEngine(); stopFiles() }
		}
	} else {
		sub, err := in.client.Subscribe(ctx, p.Events...)
		if err != nil {
			return nil, err
		}
		s.events = sub.C
		s.stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			sub.Close(ctx)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		s.close()
		return nil, errBadHandle
	}
	in.nextSub++
	in.subs[in.nextSub] = s
	return subscribeResult{Subscription: in.nextSub}, nil
}

type nextEventParams struct {
	Subscription uint64 `json:"subscription"`
	TimeoutMS    int64  `json:"timeout_ms,omitempty"`
}

type nextEventResult struct {
	Event   *engine.Event `json:"event,omitempty"`
	Closed  bool          `json:"closed"`
	Dropped uint64        `json:"dropped"`
}

// maxEventWait bounds one nextEvent call.
const maxEventWait = 60 * time.Second

func (in *instance) sub(id uint64) *subscription {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.subs[id]
}

func nextEvent(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
	p, err := decodeParams[nextEventParams](b)
	if err != nil {
		return nil, err
	}
	s := in.sub(p.Subscription)
	if s == nil {
		return nextEventResult{Closed: true}, nil
	}
	wait := time.Duration(p.TimeoutMS) * time.Millisecond
	if wait <= 0 || wait > maxEventWait {
		wait = maxEventWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ev, ok := <-s.events:
		if !ok {
			return nextEventResult{Closed: true, Dropped: s.dropped.Load()}, nil
		}
		return nextEventResult{Event: &ev, Dropped: s.dropped.Load()}, nil
	case <-s.done:
		return nextEventResult{Closed: true, Dropped: s.dropped.Load()}, nil
	case <-t.C:
		return nextEventResult{Dropped: s.dropped.Load()}, nil
	}
}

func unsubscribe(ctx context.Context, in *instance, _ string, b []byte) (any, error) {
	p, err := decodeParams[nextEventParams](b)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	s := in.subs[p.Subscription]
	delete(in.subs, p.Subscription)
	in.mu.Unlock()
	if s == nil {
		return nil, session.Errorf(session.CodeNotFound, "no subscription %d", p.Subscription)
	}
	s.close()
	return protocol.Empty{}, nil
}
