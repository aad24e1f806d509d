package api

import (
	"time"

	"github.com/cairn-dev/cairn/session"
)

// HelloParams are the params of hello.
type HelloParams struct {
	ProtocolVersion int    `json:"protocol_version,omitempty"`
	Client          string `json:"client,omitempty"`
}

// HelloResult describes the daemon (or, through the C API in embedded
// mode, the library).
type HelloResult struct {
	ServerVersion   string            `json:"server_version"`
	ProtocolVersion int               `json:"protocol_version"`
	Workspace       string            `json:"workspace"`
	PID             int               `json:"pid"`
	Capabilities    HelloCapabilities `json:"capabilities"`
	Limits          Limits            `json:"limits"`
}

// HelloCapabilities lists what the daemon and its store offer.
type HelloCapabilities struct {
	Store   session.Capabilities `json:"store"`
	Methods []string             `json:"methods"`
	// Events lists every event that can be pushed: from the daemon,
	// events.dropped included (api.EventNames); embedded, only those a
	// subscriber may name, as dropped events are counted instead.
	Events []string `json:"events"`
}

// Limits are the limits a daemon enforces (protocol/PROTOCOL.md §4).
type Limits struct {
	MaxMessageSize     int64 `json:"max_message_size"`
	MaxNestedLevels    int   `json:"max_nested_levels"`
	MaxArrayElements   int   `json:"max_array_elements"`
	MaxMapPairs        int   `json:"max_map_pairs"`
	MaxInFlightPerConn int   `json:"max_in_flight_per_conn"`
	EventQueueLen      int   `json:"event_queue_len"`
}

// Daemon states reported by status and /healthz.
const (
	StateServing  = "serving"
	StateStopping = "stopping"
)

// StatusResult is the daemon's status.
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
	Files *FilesStatus `json:"files,omitempty"`
}

// SubscribeParams are the params of subscribe and unsubscribe: event names
// (none: every event).
type SubscribeParams struct {
	Events []string `json:"events,omitempty"`
}

// SubscribeResult is the connection's subscription after the call.
type SubscribeResult struct {
	Events []string `json:"events"`
}
