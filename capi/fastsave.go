package main

import (
	"bytes"
	"encoding/base64"
	"strconv"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/jsonscan"
	"github.com/cairn-dev/cairn/session"
)

// A save that edits a session (a LangGraph checkpointer's put: artifacts
// and an index message; an agent session's appended items) is, like the
// checkpoint request (fastdecode.go), the request an embedded host sends
// on every step, and strictDecode read it through encoding/json's
// reflection and byte-at-a-time scanner. fastSave reads its usual shape in
// one jsonscan pass: a session id, an optional expect_generation, and a
// change of appended messages, put or appended artifacts, deleted
// artifact ids and a truncation. Under the same rule as fastCheckpoint it
// is only a fast path: anything else (a snapshot, another change field,
// an unknown, differently cased, escaped or repeated key, a null, a
// string with escapes, data that is not base64, invalid JSON, trailing
// data) answers false and decodeParams decodes with strictDecode. What it
// accepts decodes to what strictDecode gives.

// fastSave decodes b into p when b is a save request in the usual shape;
// false means "use strictDecode" (p is then garbage). p's messages and
// artifact metadata are b's own bytes (see values).
func fastSave(b []byte, p *api.SaveRequest) bool {
	return object(b, jsonscan.SkipSpace(b, 0), func(k, b []byte, i int) (int, bool) {
		if string(k) == "change" {
			p.Change = &session.Change{}
			return changeOf(b, i, p.Change)
		}
		end, ok := jsonscan.Value(b, i)
		if !ok {
			return 0, false
		}
		switch string(k) {
		case "session_id":
			ok = unquote(b[i:end], &p.SessionID)
		case "expect_generation":
			var g uint64
			ok = uint64Of(b[i:end], &g)
			p.ExpectGeneration = &g
		default:
			ok = false
		}
		return end, ok
	})
}

// changeOf decodes the change object at b[i] into c and returns where it
// ends.
func changeOf(b []byte, i int, c *session.Change) (int, bool) {
	return objectEnd(b, i, func(k, b []byte, i int) (int, bool) {
		switch string(k) {
		case "append_messages":
			return values(b, i, &c.AppendMessages)
		case "put_artifacts":
			return artifacts(b, i, &c.PutArtifacts)
		case "append_artifacts":
			return artifacts(b, i, &c.AppendArtifacts)
		case "delete_artifacts":
			return strs(b, i, &c.DeleteArtifacts)
		case "truncate_messages":
			end, ok := jsonscan.Value(b, i)
			if !ok {
				return 0, false
			}
			var n int64
			c.TruncateMessages = &n
			return end, int64Of(b[i:end], &n)
		}
		return 0, false
	})
}

// strs decodes a JSON array of strings into out (an empty
// array is an empty, non-nil slice, as encoding/json gives).
func strs(b []byte, i int, out *[]string) (int, bool) {
	ss := make([]string, 0, 4)
	end, ok := array(b, i, func(b []byte, i int) (int, bool) {
		end, ok := jsonscan.String(b, i)
		if !ok {
			return 0, false
		}
		var s string
		if !unquote(b[i:end], &s) {
			return 0, false
		}
		ss = append(ss, s)
		return end, true
	})
	*out = ss
	return end, ok
}

// artifacts decodes a JSON array of artifacts into out. An artifact whose
// kind is the one before it shares that string (a saver's artifacts are
// all of one kind) instead of allocating its own.
func artifacts(b []byte, i int, out *[]session.Artifact) (int, bool) {
	as := make([]session.Artifact, 0, 4)
	end, ok := array(b, i, func(b []byte, i int) (int, bool) {
		kind := ""
		if len(as) > 0 {
			kind = as[len(as)-1].Kind
		}
		as = append(as, session.Artifact{})
		return artifactOf(b, i, &as[len(as)-1], kind)
	})
	*out = as
	return end, ok
}

// artifactOf decodes the artifact object at b[i] into a; a kind equal to
// kind is that string.
func artifactOf(b []byte, i int, a *session.Artifact, kind string) (int, bool) {
	return objectEnd(b, i, func(k, b []byte, i int) (int, bool) {
		if string(k) == "data" {
			// Most of a put's bytes: decoded without a scan of its own.
			return base64String(b, i, &a.Data)
		}
		end, ok := jsonscan.Value(b, i)
		if !ok {
			return 0, false
		}
		v := b[i:end]
		switch string(k) {
		case "id":
			ok = unquote(v, &a.ID)
		case "kind":
			if kind != "" && len(v) == len(kind)+2 && string(v[1:len(v)-1]) == kind && bytes.IndexByte(v, '\\') < 0 {
				a.Kind = kind // v has no escapes: it is kind's very bytes
				break
			}
			ok = unquote(v, &a.Kind)
		case "name":
			ok = unquote(v, &a.Name)
		case "media_type":
			ok = unquote(v, &a.MediaType)
		case "run_id":
			ok = unquote(v, &a.RunID)
		case "sha256":
			ok = unquote(v, &a.SHA256)
		case "size":
			ok = int64Of(v, &a.Size)
		case "path":
			ok = unquote(v, &a.Path)
		case "metadata":
			// Any JSON value, null included, is kept as its bytes, as
			// encoding/json does for a json.RawMessage.
			a.Metadata = v[:len(v):len(v)]
		default:
			ok = false
		}
		return end, ok
	})
}

// base64Of decodes a JSON string of standard base64 into out as
// encoding/json decodes a []byte (an empty string is an empty, non-nil
// slice). A string with escapes is left to strictDecode.
func base64Of(v []byte, out *[]byte) bool {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return false
	}
	s := v[1 : len(v)-1]
	d := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(d, s)
	*out = d[:n]
	return err == nil
}

// base64String decodes the JSON string of standard base64 at b[i] into
// out, as base64Of, and returns where the string ends, without a
// jsonscan pass over it first: data that decodes has only base64's
// alphabet between its quotes (no quote, backslash, control character or
// byte above 0x7f) once the line ends base64 skips are refused, so it is
// a valid JSON string with no escapes.
func base64String(b []byte, i int, out *[]byte) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false // null, a number, ...: strictDecode decides
	}
	n := bytes.IndexByte(b[i+1:], '"')
	if n < 0 {
		return 0, false
	}
	end := i + 1 + n + 1
	s := b[i+1 : end-1]
	if bytes.IndexByte(s, '\n') >= 0 || bytes.IndexByte(s, '\r') >= 0 {
		return 0, false
	}
	return end, base64Of(b[i:end], out)
}

// uint64Of decodes a JSON number that is a uint64, as encoding/json does.
func uint64Of(v []byte, n *uint64) bool {
	x, err := strconv.ParseUint(string(v), 10, 64)
	*n = x
	return err == nil
}

// unquote decodes the JSON string v (jsonscan has checked it: valid
// escapes, UTF-8 text) into s. Artifact ids often hold quotes (a
// checkpointer's keys are JSON arrays), so the two-character escapes are
// decoded here; a \u escape, whose surrogate rules encoding/json applies,
// is left to strictDecode.
func unquote(v []byte, s *string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	v = v[1 : len(v)-1]
	i := bytes.IndexByte(v, '\\')
	if i < 0 {
		*s = string(v)
		return true
	}
	// A short string (an id) is unescaped on the stack: only the string
	// made from it is allocated.
	var room [96]byte
	out := room[:0]
	if len(v) > len(room) {
		out = make([]byte, 0, len(v))
	}
	for i >= 0 {
		out = append(out, v[:i]...)
		if i+1 >= len(v) {
			return false
		}
		switch c := v[i+1]; c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return false
		}
		v = v[i+2:]
		i = bytes.IndexByte(v, '\\')
	}
	*s = string(append(out, v...))
	return true
}
