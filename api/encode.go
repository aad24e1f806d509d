package api

import (
	"encoding/json"
	"strconv"

	"github.com/cairn-dev/cairn/session"
)

// JSONAppender is a result that appends its own JSON encoding to b, with
// the field names and shape encoding/json gives it, but its stored values
// (session.Value) copied byte for byte. encoding/json re-validates and
// compacts every json.RawMessage it encodes, which for a page of messages
// costs more than reading it; the values were validated when they were
// written (session.Normalize) and are checksummed where they are stored, so
// the hot reads skip that. The bytes may therefore differ from
// json.Marshal's (whitespace kept, '<', '>', '&' not escaped inside values)
// while meaning the same JSON.
//
// JSONSize bounds the length of what AppendJSON appends, so a caller can
// encode into a buffer of its own (the C API: straight into the C memory
// it answers with) without it growing.
//
// AppendJSON returns nil for a result that holds a value encoding/json
// refuses (a NaN or infinite float): the caller then encodes it with
// encoding/json, which reports the error.
type JSONAppender interface {
	AppendJSON(b []byte) []byte
	JSONSize() int
}

// A JSONPreparer is a JSONAppender whose JSONSize costs what encoding part
// of it does (that part goes through encoding/json). PrepareJSON encodes
// that part once and returns an appender whose JSONSize and AppendJSON
// reuse it: a caller that asks for both asks the prepared one.
type JSONPreparer interface {
	JSONAppender
	PrepareJSON() JSONAppender
}

// JSONSize bounds the length of r's AppendJSON (see JSONAppender): the
// names and two numbers of at most 20 characters each.
func (r CheckpointResult) JSONSize() int { return len(`{"generation":,"message_count":}`) + 2*20 }

// AppendJSON appends r's JSON encoding to b, what json.Marshal gives (see
// JSONAppender): every agent turn's answer, without reflection.
func (r CheckpointResult) AppendJSON(b []byte) []byte {
	b = strconv.AppendUint(append(b, `{"generation":`...), r.Generation, 10)
	b = strconv.AppendInt(append(b, `,"message_count":`...), r.MessageCount, 10)
	return append(b, '}')
}

// JSONSize bounds the length of r's AppendJSON (see JSONAppender).
func (r MessagesResult) JSONSize() int {
	// The fixed fields: names, five numbers of at most 20 digits and a
	// bool, with room to spare; the id escaped at worst 6 bytes a byte.
	n := 256 + 6*len(r.SessionID)
	for _, m := range r.Messages {
		n += max(len(m), len("null")) + 1
	}
	return n
}

// AppendJSON appends r's JSON encoding to b (see JSONAppender).
func (r MessagesResult) AppendJSON(b []byte) []byte {
	b = grow(b, len(b)+r.JSONSize())
	b = append(b, `{"session_id":`...)
	b = appendString(b, r.SessionID)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, r.Generation, 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, r.Total, 10)
	b = append(b, `,"from":`...)
	b = strconv.AppendInt(b, r.From, 10)
	b = append(b, `,"next":`...)
	b = strconv.AppendInt(b, r.Next, 10)
	b = append(b, `,"more":`...)
	b = strconv.AppendBool(b, r.More)
	// A nil list is [] here, where encoding/json would write null: the
	// schema's lists are never null.
	b = append(b, `,"messages":`...)
	b = appendArray(b, r.Messages, appendValue)
	return append(b, '}')
}

// appendArray appends items as a JSON array, each appended by add (a nil
// list is [], where encoding/json writes null).
func appendArray[T any](b []byte, items []T, add func([]byte, T) []byte) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = add(b, it)
	}
	return append(b, ']')
}

// grow returns b with room for n bytes in all.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b
	}
	nb := make([]byte, len(b), n)
	copy(nb, b)
	return nb
}

// appendValue appends a stored JSON value as it is; an empty one is null,
// as encoding/json writes a nil json.RawMessage.
func appendValue(b []byte, v session.Value) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it. Ids and names are plain ASCII, which needs no escape; any
// other string goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
