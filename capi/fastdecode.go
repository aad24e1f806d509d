package main

import (
	"bytes"
	"strconv"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/jsonscan"
	"github.com/cairn-dev/cairn/session"
)

// The checkpoint request is the one an agent sends every turn, carrying
// the turn's messages: strictDecode reads it twice through encoding/json's
// byte-at-a-time scanner, which cost more than the rest of the call's JSON
// work together. fastCheckpoint reads the request's usual shape in one
// jsonscan pass instead. It is only a fast path: whatever it does not
// recognise exactly (an unknown, differently cased, escaped or repeated
// key, a null where a value is expected, a number that is not an int64,
// invalid JSON anywhere, trailing data) makes it answer false, and
// decodeParams then decodes with strictDecode, which decides and phrases
// the error as before. So it accepts nothing strictDecode refuses, and
// what it accepts decodes to what strictDecode would give.

// fastCheckpoint decodes b into p when b is a checkpoint request in the
// usual shape; false means "use strictDecode" (p is then garbage). p's
// messages and state are b's own bytes, not copies (see values).
func fastCheckpoint(b []byte, p *api.CheckpointRequest) bool {
	return object(b, jsonscan.SkipSpace(b, 0), func(k, b []byte, i int) (int, bool) {
		if string(k) == "new_messages" {
			// The messages are scanned once, element by element.
			return values(b, i, &p.NewMessages)
		}
		end, ok := jsonscan.Value(b, i)
		if !ok {
			return 0, false
		}
		v := b[i:end]
		switch string(k) {
		case "run_id":
			ok = unquote(v, &p.RunID)
		case "session_id":
			ok = unquote(v, &p.SessionID)
		case "turn":
			ok = int64Of(v, &p.Turn)
		case "tool_calls_count":
			ok = int64Of(v, &p.ToolCallsCount)
		case "usage":
			ok = usageOf(v, &p.Usage)
		case "state":
			// Any JSON value, null included, is kept as its bytes, as
			// encoding/json does for a json.RawMessage.
			p.State = v[:len(v):len(v)]
		default:
			ok = false
		}
		return end, ok
	})
}

// object walks the JSON object at b[i], which must be all of b but
// whitespace, calling member with each key's raw bytes (no quotes; a key
// with escapes is refused) and the index of its value in b; member decodes
// the value and returns where it ends. object returns false when b is not
// such an object, a key is repeated (encoding/json keeps the last value,
// or merges objects: strictDecode decides), the object has more than
// maxMembers members, or member returned false.
func object(b []byte, i int, member func(k, b []byte, i int) (int, bool)) bool {
	end, ok := objectEnd(b, i, member)
	return ok && jsonscan.SkipSpace(b, end) == len(b)
}

// maxMembers bounds the members of an object object decodes: every
// request it reads has fewer (an artifact has ten).
const maxMembers = 16

// objectEnd is object for an object followed by more of b: it returns
// where the object ends.
func objectEnd(b []byte, i int, member func(k, b []byte, i int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	var keys [maxMembers][]byte
	n := 0
	for {
		end, ok := jsonscan.String(b, i)
		if !ok {
			return 0, false
		}
		k := b[i+1 : end-1]
		if bytes.IndexByte(k, '\\') >= 0 || n == maxMembers {
			return 0, false
		}
		for _, seen := range keys[:n] {
			if bytes.Equal(seen, k) {
				return 0, false
			}
		}
		keys[n] = k
		n++
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = jsonscan.SkipSpace(b, i+1)
		if i >= len(b) {
			return 0, false
		}
		if end, ok = member(k, b, i); !ok {
			return 0, false
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// array walks the JSON array at b[i], calling elem with the index of each
// element; elem decodes it and returns where it ends. array returns where
// the array ends.
func array(b []byte, i int, elem func(b []byte, i int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return 0, false // null, an object, ...: strictDecode decides
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		end, ok := elem(b, i)
		if !ok {
			return 0, false
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// int64Of decodes a JSON number that is an int64, as encoding/json does
// (it refuses a fraction, an exponent and overflow alike).
func int64Of(v []byte, n *int64) bool {
	x, err := strconv.ParseInt(string(v), 10, 64)
	*n = x
	return err == nil
}

func float64Of(v []byte, f *float64) bool {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false // null, a string, ...: strictDecode decides
	}
	x, err := strconv.ParseFloat(string(v), 64)
	*f = x
	return err == nil
}

// values decodes the JSON array at b[i] into its elements' bytes and
// returns where the array ends. The elements are b's own bytes, not
// copies, though b may be C memory the caller frees when the call
// returns: a call only reads its params while it runs (the daemon's
// client encodes them into its request; the engine and the stores copy
// what they keep: a log's bytes, a checkpoint memo's state), and copying
// a turn's messages cost an allocation of their size per call, which kept
// the garbage collector busy. TestEmbeddedParamsNotRetained checks it.
func values(b []byte, i int, out *[]session.Value) (int, bool) {
	vs := make([]session.Value, 0, 4)
	end, ok := array(b, i, func(b []byte, i int) (int, bool) {
		end, ok := jsonscan.Value(b, i)
		if !ok {
			return 0, false
		}
		vs = append(vs, b[i:end:end])
		return end, true
	})
	*out = vs
	return end, ok
}

func usageOf(v []byte, u *session.Usage) bool {
	return object(v, 0, func(k, b []byte, i int) (int, bool) {
		end, ok := jsonscan.Value(b, i)
		if !ok {
			return 0, false
		}
		x := b[i:end]
		switch string(k) {
		case "input_tokens":
			ok = int64Of(x, &u.InputTokens)
		case "output_tokens":
			ok = int64Of(x, &u.OutputTokens)
		case "total_tokens":
			ok = int64Of(x, &u.TotalTokens)
		case "cost":
			ok = float64Of(x, &u.Cost)
		default:
			ok = false
		}
		return end, ok
	})
}
