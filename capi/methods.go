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

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/checked"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/internal/storeopen"
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
	// MaxSessionBytes limits a session's live bytes in embedded mode (0:
	// fsstore.DefaultMaxSessionBytes); a daemon takes
	// --max-session-bytes instead.
	MaxSessionBytes int64 `json:"max_session_bytes"`
	// Store is a postgres:// URL: embedded mode opens that database
	// (pgstore); daemon mode passes it as --store to a daemon it starts.
	Store string `json:"store"`
	// CallTimeoutMS bounds each call's wait for the daemon (daemon mode;
	// protocol.Options.CallTimeout, which leaves the methods named by
	// protocol.Unbounded alone); absent: defaultCallTimeout; 0: no bound.
	// Embedded mode has no daemon to wait for and ignores it.
	CallTimeoutMS *int64 `json:"call_timeout_ms"`
}

// maxCallTimeout is the largest call_timeout_ms cairn_open takes.
const maxCallTimeout = 24 * time.Hour

// defaultCallTimeout bounds a daemon-mode call when cairn_open is not
// given call_timeout_ms: long enough that only a daemon that is stopped
// or stuck reaches it (a commit's fdatasync takes milliseconds, seconds on
// a disk under heavy writeback), so a slow commit is never failed early;
// the bindings' own checkpoint connections wait as long. A variable so
// that tests can shorten it.
var defaultCallTimeout = 5 * time.Minute

// connectTimeout bounds cairn_open in daemon mode, daemon start included
// (a variable so that tests can shorten it).
var connectTimeout = 15 * time.Second

// instance is what a handle refers to: an engine in this process, or a
// client of the workspace's daemon.
type instance struct {
	pid       int
	workspace string
	eng       *engine.Engine     // embedded mode
	files     *workspace.Tracker // embedded mode, when the tree could be tracked
	client    *protocol.Client   // daemon mode
	release   func()             // embedded mode: lets go of the workspace lock, after the store is closed

	// padMu guards pad, which lends the buffers of one embedded read of
	// messages at a time (callC); a concurrent read allocates its own.
	padMu sync.Mutex
	pad   scratch.Pad

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
		// As git finds a repository: see protocol.Discover.
		ws, _, err := protocol.Discover("")
		if err != nil {
			return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: no workspace given, and the current directory cannot be used: %v", err)
		}
		o.Workspace = ws
	}
	ws, err := filepath.Abs(o.Workspace)
	if err != nil {
		return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: workspace: %v", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: workspace %s is not a directory", ws)
	}
	callTimeout := defaultCallTimeout
	if o.CallTimeoutMS != nil {
		ms := *o.CallTimeoutMS
		if ms < 0 || ms > maxCallTimeout.Milliseconds() {
			return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: call_timeout_ms %d is out of range (0 to %d; 0: no bound)", ms, maxCallTimeout.Milliseconds())
		}
		callTimeout = time.Duration(ms) * time.Millisecond
	}
	in := &instance{pid: os.Getpid(), workspace: ws, subs: map[uint64]*subscription{}}
	if o.Embedded {
		if o.MaxSessionBytes < 0 {
			return nil, session.Errorf(session.CodeInvalidArgument, "cairn_open: max_session_bytes must not be negative")
		}
		procsEmbeddedOpening()
		opened := false
		defer func() {
			if !opened {
				procsEmbeddedClosed()
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		st, release, err := storeopen.Open(ctx, ws, o.Store, fsstore.Options{MaxSessionBytes: o.MaxSessionBytes, PreallocBytes: fsstore.DefaultPreallocBytes}, nil)
		cancel()
		if err != nil {
			var le *session.LockedError
			if errors.As(err, &le) {
				return nil, lockedError(ws, le)
			}
			return nil, err
		}
		eopts := engine.Options{Root: ws}
		// Tracking is best effort, as in the daemon: without it drift is
		// reported as not tracked.
		if tr, err := workspace.Open(ws, workspace.Options{}); err == nil {
			in.files, eopts.Workspace = tr, tr
		}
		in.eng, in.release = engine.New(st, eopts), release
		opened = true
		return in, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	dargs := o.DaemonArgs
	if o.Store != "" {
		dargs = append([]string{"--store", o.Store}, dargs...)
	}
	popts := &protocol.Options{
		DaemonPath:  o.Daemon,
		DaemonArgs:  dargs,
		ClientName:  "libcairn " + version.Version,
		CallTimeout: callTimeout,
	}
	if o.AutoStart != nil && !*o.AutoStart {
		popts.NoAutoStart = true
	}
	c, err := protocol.Connect(ctx, ws, popts)
	if err != nil {
		return nil, err
	}
	in.client = c
	procsClientOpened()
	return in, nil
}

// lockedError says who holds the workspace an embedded open wanted and
// what to do about it. A daemon is the usual holder (one a client started
// runs until it has been idle for ten minutes): work through it, or stop
// it.
func lockedError(ws string, le *session.LockedError) error {
	switch kind := protocol.ProcessKind(le.PID); {
	case le.PID <= 0:
		return session.Errorf(session.CodeLocked,
			"embedded mode needs the workspace store to itself, but another process holds %s: use daemon mode, or stop that process", le.Path)
	case kind == "cairnd":
		return session.Errorf(session.CodeLocked,
			"embedded mode needs the workspace store to itself, but cairnd pid %d serves workspace %s: use daemon mode, or stop the daemon with `cairn --workspace %s daemon stop` (or `kill %d`) and open again",
			le.PID, ws, ws, le.PID)
	case kind != "":
		return session.Errorf(session.CodeLocked,
			"embedded mode needs the workspace store to itself, but pid %d (%s) holds %s in embedded mode: close it (or its cairn handle) and open again",
			le.PID, kind, le.Path)
	}
	return session.Errorf(session.CodeLocked,
		"embedded mode needs the workspace store to itself, but pid %d holds %s (a cairnd daemon or another embedded process): use daemon mode, or stop that process",
		le.PID, le.Path)
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
		in.release()
		procsEmbeddedClosed()
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
	_, p, err := decodeParamsCtx[P](context.Background(), b, false)
	return p, err
}

// decodeParamsCtx decodes params b. When a fast decoder (fastCheckpoint,
// fastSave) read them, the messages and a checkpoint's state are b's
// bytes, not copies (see values), and in embedded mode the context it
// returns knows them as validated (internal/checked), so the engine does
// not scan them again. forward is daemon mode, where the daemon validates.
func decodeParamsCtx[P any](ctx context.Context, b []byte, forward bool) (context.Context, P, error) {
	var p P
	if len(bytes.TrimSpace(b)) == 0 {
		return ctx, p, nil
	}
	if cp, ok := any(&p).(*api.CheckpointRequest); ok {
		if fastCheckpoint(b, cp) {
			if !forward {
				ctx = checked.With(ctx, append(cp.NewMessages[:len(cp.NewMessages):len(cp.NewMessages)], cp.State)...)
			}
			return ctx, p, nil
		}
		*cp = api.CheckpointRequest{}
	}
	if sp, ok := any(&p).(*api.SaveRequest); ok {
		if fastSave(b, sp) {
			if !forward && sp.Change != nil {
				ctx = checked.With(ctx, sp.Change.AppendMessages...)
			}
			return ctx, p, nil
		}
		*sp = api.SaveRequest{}
	}
	if err := strictDecode(b, &p); err != nil {
		return ctx, p, session.Errorf(session.CodeInvalidArgument, "params: %v", err)
	}
	return ctx, p, nil
}

// method runs one method in either mode.
type method func(ctx context.Context, in *instance, params []byte) (any, error)

// entry is one method of the C API, typed by its api.Spec.
type entry struct {
	name string
	m    method
}

// lib makes a method from a function of the decoded params.
func lib[P, R any](s api.Spec[P, R], fn func(ctx context.Context, in *instance, p P) (any, error)) entry {
	return libParams(s.Name, fn)
}

// libParams makes the method name from a function of params P, for the
// methods whose params differ in the C API (api.Method.LibParams).
func libParams[P any](name string, fn func(ctx context.Context, in *instance, p P) (any, error)) entry {
	return entry{name, func(ctx context.Context, in *instance, b []byte) (any, error) {
		ctx, p, err := decodeParamsCtx[P](ctx, b, in.client != nil)
		if err != nil {
			return nil, err
		}
		return fn(ctx, in, p)
	}}
}

// forward makes a method whose params and result are the same in JSON and
// on the wire: the engine runs it in embedded mode (through engine.Served,
// where each operation has its method's shape), the daemon otherwise.
func forward[P, R any](s api.Spec[P, R], local func(engine.Served, context.Context, P) (R, error)) entry {
	return lib(s, func(ctx context.Context, in *instance, p P) (any, error) {
		if in.eng != nil {
			return local(engine.Served{Engine: in.eng}, ctx, p)
		}
		return protocol.Do(ctx, in.client, s, p)
	})
}

// methods maps every method of api.Methods and api.LibMethods to its C API
// implementation; table panics at load if one is missing or unknown.
var methods = table(
	lib(api.Hello, hello),
	lib(api.Status, status),
	lib(api.Subscribe, subscribe),
	libParams(api.Unsubscribe.Name, unsubscribe),
	forward(api.Save, engine.Served.Save),
	forward(api.ResumeSession, engine.Served.ResumeSession),
	forward(api.Summary, engine.Served.Summary),
	forward(api.Messages, engine.Served.Messages),
	forward(api.Artifact, engine.Served.Artifact),
	forward(api.Artifacts, engine.Served.Artifacts),
	forward(api.ArtifactsByID, engine.Served.ArtifactsByID),
	forward(api.Run, engine.Served.Run),
	forward(api.Runs, engine.Served.Runs),
	forward(api.RunEvents, engine.Served.RunEvents),
	forward(api.BeginRun, engine.Served.BeginRun),
	forward(api.Checkpoint, engine.Served.Checkpoint),
	forward(api.CompleteRun, engine.Served.CompleteRun),
	forward(api.ResumeRun, engine.Served.ResumeRun),
	forward(api.BeginWorkflow, engine.Served.BeginWorkflow),
	forward(api.CompleteStep, engine.Served.CompleteStep),
	forward(api.FinishWorkflow, engine.Served.FinishWorkflow),
	forward(api.List, engine.Served.List),
	forward(api.Delete, engine.Served.Delete),
	forward(api.Fork, engine.Served.Fork),
	forward(api.Export, engine.Served.Export),
	forward(api.Import, engine.Served.Import),
	forward(api.ExportFile, engine.Served.ExportFile),
	forward(api.ImportFile, engine.Served.ImportFile),
	forward(api.Verify, engine.Served.Verify),
	forward(api.Repair, engine.Served.Repair),
	lib(api.Changes, func(ctx context.Context, in *instance, p api.ChangesParams) (any, error) {
		if in.client != nil {
			return in.client.Changes(ctx, p.Since)
		}
		if in.files == nil {
			return nil, &codedError{code: string(api.CodeUnavailable), msg: "the workspace is not tracked in this process"}
		}
		return in.files.Changes(ctx, p.Since)
	}),
	forward(api.Handoff, engine.Served.Handoff),
	forward(api.RuntimeCheck, engine.Served.RuntimeCheck),
	forward(api.RuntimeRestart, engine.Served.RuntimeRestart),
	lib(api.NextEvent, nextEvent),
)

// table builds the C API's dispatch table, checking that it serves exactly
// the methods of api.Methods and api.LibMethods.
func table(es ...entry) map[string]method {
	m := make(map[string]method, len(es))
	names := make([]string, len(es))
	for i, e := range es {
		m[e.name], names[i] = e.m, e.name
	}
	if err := api.CheckServed(names, api.Methods, api.LibMethods); err != nil {
		panic("capi: " + err.Error())
	}
	return m
}

func status(ctx context.Context, in *instance, _ api.Empty) (any, error) {
	res := api.LibStatus{Mode: "embedded", Version: version.Version, Workspace: in.workspace, PID: in.pid}
	if in.client != nil {
		st, err := in.client.Status(ctx)
		if err != nil {
			return nil, err
		}
		res.Mode, res.Daemon = "daemon", &st
	}
	return res, nil
}

func hello(ctx context.Context, in *instance, _ api.HelloParams) (any, error) {
	if in.client != nil {
		return protocol.Do(ctx, in.client, api.Hello, api.HelloParams{ProtocolVersion: api.ProtocolVersion, Client: "libcairn"})
	}
	return api.HelloResult{
		ServerVersion: version.Version, ProtocolVersion: api.ProtocolVersion, Workspace: in.workspace, PID: in.pid,
		Capabilities: api.HelloCapabilities{Store: in.eng.Capabilities(), Methods: methodNames(), Events: api.SubscribableEvents()},
	}, nil
}

// methodNames lists the methods of the C API: api.Methods, then
// api.LibMethods.
func methodNames() []string {
	names := api.MethodNames()
	for _, m := range api.LibMethods {
		names = append(names, m.Name)
	}
	return names
}

func (in *instance) invoke(ctx context.Context, name string, params []byte) (any, error) {
	m := methods[name]
	if m == nil {
		return nil, &codedError{code: string(api.CodeMethodNotFound), msg: fmt.Sprintf("no method %q", truncate(name, 64))}
	}
	return m(ctx, in, params)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// subscription queues events for nextEvent.
type subscription struct {
	events  <-chan api.Event
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

func subscribe(ctx context.Context, in *instance, p api.SubscribeParams) (any, error) {
	if err := protocol.CheckEvents(p.Events); err != nil {
		return nil, err
	}
	s := &subscription{done: make(chan struct{})}
	if in.eng != nil {
		want := map[string]bool{}
		for _, e := range p.Events {
			want[e] = true
		}
		ch := make(chan api.Event, eventQueue)
		s.events = ch
		deliver := func(ev api.Event) {
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
				deliver(api.NewEvent(api.EventFileChanged, api.FileChangedData{Path: path, Kind: kind}))
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
	return api.LibSubscription{Subscription: in.nextSub}, nil
}

// maxEventWait bounds one nextEvent call.
const maxEventWait = 60 * time.Second

func (in *instance) sub(id uint64) *subscription {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.subs[id]
}

func nextEvent(ctx context.Context, in *instance, p api.NextEventParams) (any, error) {
	s := in.sub(p.Subscription)
	if s == nil {
		return api.NextEventResult{Closed: true}, nil
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
			return api.NextEventResult{Closed: true, Dropped: s.dropped.Load()}, nil
		}
		return api.NextEventResult{Event: &ev, Dropped: s.dropped.Load()}, nil
	case <-s.done:
		return api.NextEventResult{Closed: true, Dropped: s.dropped.Load()}, nil
	case <-t.C:
		return api.NextEventResult{Dropped: s.dropped.Load()}, nil
	}
}

func unsubscribe(ctx context.Context, in *instance, p api.NextEventParams) (any, error) {
	in.mu.Lock()
	s := in.subs[p.Subscription]
	delete(in.subs, p.Subscription)
	in.mu.Unlock()
	if s == nil {
		return nil, session.Errorf(session.CodeNotFound, "no subscription %d", p.Subscription)
	}
	s.close()
	return api.Empty{}, nil
}
