package protocol

import (
	"time"

	"github.com/cairn-dev/cairn/api"
)

// Subprotocol is the WebSocket subprotocol a client must offer; it names the
// protocol version.
const Subprotocol = "cairn.v1"

// api.Limits of the protocol. PROTOCOL.md §8 says what happens when each is
// exceeded.
const (
	// DefaultMaxMessageSize is the default largest WebSocket message, in
	// bytes, either side accepts. It is enforced with the WebSocket read
	// limit; a larger message closes the connection with status 1009.
	DefaultMaxMessageSize int64 = 64 << 20
	// MinMaxMessageSize is the smallest message size limit a daemon or
	// client may be configured with.
	MinMaxMessageSize int64 = 4 << 10
	// MaxNestedLevels is the deepest CBOR nesting of arrays and maps
	// accepted in one message.
	MaxNestedLevels = 32
	// MaxArrayElements is the largest CBOR array accepted.
	MaxArrayElements = 1 << 20
	// MaxMapPairs is the largest CBOR map accepted.
	MaxMapPairs = 1 << 16
	// MaxInFlightPerConn is how many messages of one connection the daemon
	// holds at once, from reading each until its answer is written; beyond
	// it, it stops reading that connection.
	MaxInFlightPerConn = 64
	// EventQueueLen is the per-connection queue of events awaiting delivery;
	// events that find it full are dropped and counted.
	EventQueueLen = 1024
	// MaxConnections is how many protocol connections a daemon serves at
	// once; further upgrades are answered 503.
	MaxConnections = 1024
	// WriteTimeout bounds how long the daemon waits to write one message to
	// a client before it disconnects that client.
	WriteTimeout = 30 * time.Second
	// HandshakeTimeout bounds reading an HTTP request's headers.
	HandshakeTimeout = 10 * time.Second
)

// DefaultLimits returns the limits a daemon with the message size limit
// maxMessageSize enforces, as hello reports them.
func DefaultLimits(maxMessageSize int64) api.Limits {
	return api.Limits{
		MaxMessageSize:     maxMessageSize,
		MaxNestedLevels:    MaxNestedLevels,
		MaxArrayElements:   MaxArrayElements,
		MaxMapPairs:        MaxMapPairs,
		MaxInFlightPerConn: MaxInFlightPerConn,
		EventQueueLen:      EventQueueLen,
	}
}
