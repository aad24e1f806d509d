package api

import (
	"reflect"
	"strings"
)

// Event names. Every commit publishes session.committed; a checkpoint, a
// run's end and a resume then also publish their own event from the same
// commit. Events are published after what they report is durable.
const (
	EventSessionCommitted      = "session.committed"
	EventSessionDeleted        = "session.deleted"
	EventRunCheckpointed       = "run.checkpointed"
	EventRunCompleted          = "run.completed"
	EventRunResumed            = "run.resumed"
	EventWorkflowStepCompleted = "workflow.step_completed"
	// EventFileChanged is pushed when a workspace file is added, modified
	// or deleted (path "" with kind "overflow": events were lost; re-query
	// with changes).
	EventFileChanged = "file.changed"
	// EventDropped is pushed after a connection's event queue overflowed.
	// It is always delivered and cannot be named in subscribe.
	EventDropped = "events.dropped"
)

// Event is something that happened: its name and its data, a map whose
// keys are the json names of the event's data type (Events).
type Event struct {
	Type string         `json:"event"`
	Data map[string]any `json:"data"`
}

// SessionCommittedData is the data of session.committed.
type SessionCommittedData struct {
	SessionID  string `json:"session_id"`
	Generation uint64 `json:"generation"`
}

// SessionDeletedData is the data of session.deleted.
type SessionDeletedData struct {
	SessionID string `json:"session_id"`
}

// RunCheckpointedData is the data of run.checkpointed.
type RunCheckpointedData struct {
	SessionID  string `json:"session_id"`
	RunID      string `json:"run_id"`
	Turn       int64  `json:"turn"`
	Generation uint64 `json:"generation"`
}

// RunCompletedData is the data of run.completed.
type RunCompletedData struct {
	SessionID  string `json:"session_id"`
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	Generation uint64 `json:"generation"`
}

// RunResumedData is the data of run.resumed: RunID is the new run.
type RunResumedData struct {
	SessionID   string `json:"session_id"`
	RunID       string `json:"run_id"`
	ResumedFrom string `json:"resumed_from"`
	Generation  uint64 `json:"generation"`
}

// WorkflowStepCompletedData is the data of workflow.step_completed.
type WorkflowStepCompletedData struct {
	WorkflowID string `json:"workflow_id"`
	StepID     string `json:"step_id"`
}

// FileChangedData is the data of file.changed; Kind is added, modified,
// deleted or overflow.
type FileChangedData struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// DroppedData is the data of events.dropped: how many events this
// connection lost.
type DroppedData struct {
	Dropped uint64 `json:"dropped"`
}

// EventSpec names one event and the type of its data.
type EventSpec struct {
	Name string
	Data reflect.Type
}

// Events lists every event, in a stable order: the ones a subscriber may
// name, then events.dropped.
var Events = []EventSpec{
	{EventSessionCommitted, reflect.TypeFor[SessionCommittedData]()},
	{EventSessionDeleted, reflect.TypeFor[SessionDeletedData]()},
	{EventRunCheckpointed, reflect.TypeFor[RunCheckpointedData]()},
	{EventRunCompleted, reflect.TypeFor[RunCompletedData]()},
	{EventRunResumed, reflect.TypeFor[RunResumedData]()},
	{EventWorkflowStepCompleted, reflect.TypeFor[WorkflowStepCompletedData]()},
	{EventFileChanged, reflect.TypeFor[FileChangedData]()},
	{EventDropped, reflect.TypeFor[DroppedData]()},
}

// EventNames lists every event a daemon pushes, in the order of Events:
// hello's capabilities.events.
func EventNames() []string {
	out := make([]string, len(Events))
	for i, e := range Events {
		out[i] = e.Name
	}
	return out
}

// SubscribableEvents lists the events a subscriber may name: every event
// but events.dropped, which is always delivered.
func SubscribableEvents() []string {
	var out []string
	for _, e := range Events {
		if e.Name != EventDropped {
			out = append(out, e.Name)
		}
	}
	return out
}

// NewEvent returns the event name with data (one of the *Data types) as
// its map, keyed by the json names of data's fields.
func NewEvent(name string, data any) Event {
	v := reflect.ValueOf(data)
	t := v.Type()
	m := make(map[string]any, t.NumField())
	for i := range t.NumField() {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[key] = v.Field(i).Interface()
	}
	return Event{Type: name, Data: m}
}
