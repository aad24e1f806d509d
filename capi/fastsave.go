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
// false means "use strictDecode" (p is then garbage). Without clone, p's
// messages and artifact metadata are b's own bytes (see
// fastCheckpointInto).
func fastSave(b []byte, p *api.SaveRequest, clone bool) bool {
	const (
		sessionID = 1 << iota
		change
		expect
	)
	var seen int
	return object(b, jsonscan.SkipSpace(b, 0), func(k, b []byte, i int) (int, bool) {
		var bit int
		var end int
		ok := true
		switch string(k) {
		case "change":
			bit = change
			p.Change = &session.Change{}
			end, ok = changeOf(b, i, p.Change, clone)
		case "session_id", "expect_generation":
			if end, ok = jsonscan.Value(b, i); !ok {
				return 0, false
			}
			if k[0] == 's' {
				bit, ok = sessionID, unquote(b[i:end], &p.SessionID)
			} else {
				var g uint64
				bit, ok = expect, uint64Of(b[i:end], &g)
				p.ExpectGeneration = &g
			}
		default:
			ok = false
		}
		if !ok || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		return end, true
	})
}

// changeOf decodes the change object at b[i] into c and returns where it
// ends.
func changeOf(b []byte, i int, c *session.Change, clone bool) (int, bool) {
	const (
		appendMessages = 1 << iota
		putArtifacts
		appendArtifacts
		deleteArtifacts
		truncateMessages
	)
	var seen int
	return objectEnd(b, i, func(k, b []byte, i int) (int, bool) {
		var bit, end int
		ok := true
		switch string(k) {
		case "append_messages":
			bit = appendMessages
			end, ok = values(b, i, &c.AppendMessages, clone)
		case "put_artifacts":
			bit = putArtifacts
			end, ok = artifacts(b, i, &c.PutArtifacts, clone)
		case "append_artifacts":
			bit = appendArtifacts
			end, ok = artifacts(b, i, &c.AppendArtifacts, clone)
		case "delete_artifacts":
			bit = deleteArtifacts
			end, ok = strs(b, i, &c.DeleteArtifacts)
		case "truncate_messages":
			if end, ok = jsonscan.Value(b, i); !ok {
				return 0, false
			}
			var n int64
			bit, ok = truncateMessages, int64Of(b[i:end], &n)
			c.TruncateMessages = &n
		default:
			ok = false
		}
		if !ok || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		return end, true
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

// artifacts decodes a JSON array of artifacts into out.
func artifacts(b []byte, i int, out *[]session.Artifact, clone bool) (int, bool) {
	as := make([]session.Artifact, 0, 4)
	end, ok := array(b, i, func(b []byte, i int) (int, bool) {
		as = append(as, session.Artifact{})
		return artifactOf(b, i, &as[len(as)-1], clone)
	})
	*out = as
	return end, ok
}

// artifactOf decodes the artifact object at b[i] into a.
func artifactOf(b []byte, i int, a *session.Artifact, clone bool) (int, bool) {
	var seen int
	return objectEnd(b, i, func(k, b []byte, i int) (int, bool) {
		end, ok := jsonscan.Value(b, i)
		if !ok {
			return 0, false
		}
		v := b[i:end]
		var bit int
		switch string(k) {
		case "id":
			bit, ok = 1<<0, unquote(v, &a.ID)
		case "kind":
			bit, ok = 1<<1, unquote(v, &a.Kind)
		case "name":
			bit, ok = 1<<2, unquote(v, &a.Name)
		case "media_type":
			bit, ok = 1<<3, unquote(v, &a.MediaType)
		case "run_id":
			bit, ok = 1<<4, unquote(v, &a.RunID)
		case "sha256":
			bit, ok = 1<<5, unquote(v, &a.SHA256)
		case "size":
			bit, ok = 1<<6, int64Of(v, &a.Size)
		case "data":
			bit, ok = 1<<7, base64Of(v, &a.Data)
		case "path":
			bit, ok = 1<<8, unquote(v, &a.Path)
		case "metadata":
			// Any JSON value, null included, is kept as its bytes, as
			// encoding/json does for a json.RawMessage.
			bit = 1 << 9
			a.Metadata = v[:len(v):len(v)]
			if clone {
				a.Metadata = bytes.Clone(v)
			}
		default:
			ok = false
		}
		if !ok || seen&bit != 0 {
			return 0, false
		}
		seen |= bit
		return end, true
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
	out := make([]byte, 0, len(v))
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
