package protocol

import (
	"slices"
	"time"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

// Method names (PROTOCOL.md §5). The engine's methods keep the engine's
// names in lower camel case.
const (
	MethodHello          = "hello"
	MethodStatus         = "status"
	MethodSubscribe      = "subscribe"
	MethodUnsubscribe    = "unsubscribe"
	MethodSave           = "save"
	MethodResumeSession  = "resumeSession"
	MethodBeginRun       = "beginRun"
	MethodCheckpoint     = "checkpoint"
	MethodCompleteRun    = "completeRun"
	MethodResumeRun      = "resumeRun"
	MethodBeginWorkflow  = "beginWorkflow"
	MethodCompleteStep   = "completeStep"
	MethodFinishWorkflow = "finishWorkflow"
	MethodList           = "list"
	MethodDelete         = "delete"
	MethodFork           = "fork"
	MethodExport         = "export"
	MethodImport         = "import"
	MethodChanges        = "changes"
	MethodHandoff        = "handoff"
	MethodRuntimeCheck   = "runtime.check"
	MethodRuntimeRestart = "runtime.restart"
)

// Methods lists every method, in the order of PROTOCOL.md §5.
func Methods() []string {
	return []string{
		MethodHello, MethodStatus, MethodSubscribe, MethodUnsubscribe,
		MethodSave, MethodResumeSession, MethodBeginRun, MethodCheckpoint,
		MethodCompleteRun, MethodResumeRun, MethodBeginWorkflow,
		MethodCompleteStep, MethodFinishWorkflow, MethodList, MethodDelete,
		MethodFork, MethodExport, MethodImport, MethodChanges,
		MethodHandoff, MethodRuntimeCheck, MethodRuntimeRestart,
	}
}

// EventFileChanged is pushed when a workspace file is added, modified or
// deleted; its data is {path, kind} (kind "added", "modified" or
// "deleted"; path "" with kind "overflow" means events were lost: re-query
// with changes).
const EventFileChanged = "file.changed"

// EventDropped is pushed after a connection's event queue overflowed; its
// data is {dropped: uint}.
const EventDropped = "events.dropped"

// Events lists every event a subscriber may name (PROTOCOL.md §6).
func Events() []string {
	return []string{
		engine.EventSessionCommitted, engine.EventSessionDeleted,
		engine.EventRunCheckpointed, engine.EventRunCompleted,
		engine.EventRunResumed, engine.EventWorkflowStepCompleted,
		EventFileChanged,
	}
}

// CheckEvents returns an invalid_argument error naming the first of names
// that is not an event a subscriber may name (Events).
func CheckEvents(names []string) error {
	for _, n := range names {
		if !slices.Contains(Events(), n) {
			if len(n) > 64 {
				n = n[:64] + "…"
			}
			return session.Errorf(session.CodeInvalidArgument, "unknown event %q", n)
		}
	}
	return nil
}

// ChangesParams are the params of changes.
type ChangesParams struct {
	Since string `json:"since,omitempty"`
}

// Empty is the params or result of a method that has none: an empty map.
type Empty struct{}

// HelloParams are the params of hello.
type HelloParams struct {
	ProtocolVersion int    `json:"protocol_version,omitempty"`
	Client          string `json:"client,omitempty"`
}

// HelloResult describes the daemon.
type HelloResult struct {
	ServerVersion   string           `json:"server_version"`
	ProtocolVersion int              `json:"protocol_version"`
	Workspace       string           `json:"workspace"`
	PID             int              `json:"pid"`
	Capabilities    HelloCapabilites `json:"capabilities"`
	Limits          Limits           `json:"limits"`
}

// HelloCapabilites lists what the daemon and its store offer.
type HelloCapabilites struct {
	Store   session.Capabilities `json:"store"`
	Methods []string             `json:"methods"`
	Events  []string             `json:"events"`
}

// Limits are the limits a daemon enforces.
type Limits struct {
	MaxMessageSize     int64 `json:"max_message_size"`
	MaxNestedLevels    int   `json:"max_nested_levels"`
	MaxArrayElements   int   `json:"max_array_elements"`
	MaxMapPairs        int   `json:"max_map_pairs"`
	MaxInFlightPerConn int   `json:"max_in_flight_per_conn"`
	EventQueueLen      int   `json:"event_queue_len"`
}

// StatusResult is the result of status.
type StatusResult struct {
	ServerVersion   string    `json:"server_version"`
	ProtocolVersion int       `json:"protocol_version"`
	Workspace       string    `json:"workspace"`
	Socket          string    `json:"socket"`
	PID             int       `json:"pid"`
	StartedAt       time.Time `json:"started_at"`
	UptimeMS        int64     `json:"uptime_ms"`
	Connections     int       `json:"connections"`
	Subscribers     int       `json:"subscribers"`
	InFlight        int       `json:"in_flight"`
	Requests        uint64    `json:"requests"`
	EventsDropped   uint64    `json:"events_dropped"`
	State           string    `json:"state"`
	// Files reports workspace tracking (nil: not tracked).
	Files *workspace.Status `json:"files,omitempty"`
}

// Daemon states reported by status and /healthz.
const (
	StateServing  = "serving"
	StateStopping = "stopping"
)

// SubscribeParams are the params of subscribe and unsubscribe.
type SubscribeParams struct {
	Events []string `json:"events,omitempty"`
}

// SubscribeResult is the connection's subscription after the call.
type SubscribeResult struct {
	Events []string `json:"events"`
}

// SessionParams name a session (resumeSession, delete, export).
type SessionParams struct {
	SessionID string `json:"session_id"`
}

// WorkflowParams name a workflow (finishWorkflow).
type WorkflowParams struct {
	WorkflowID string `json:"workflow_id"`
}

// ListResult is the result of list.
type ListResult struct {
	Sessions []session.Summary `json:"sessions"`
}

// ExportResult is the result of export: the JSON envelope's text.
type ExportResult struct {
	Envelope []byte `json:"envelope"`
}

// ImportParams are the params of import: the JSON envelope's text.
type ImportParams struct {
	Envelope []byte `json:"envelope"`
}
