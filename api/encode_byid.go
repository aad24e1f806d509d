package api

import (
	"encoding/base64"
	"strconv"

	"github.com/cairn-dev/cairn/session"
)

// JSONSize bounds the length of r's AppendJSON (see JSONAppender).
func (r ArtifactsByIDResult) JSONSize() int {
	n := 128 + 6*len(r.SessionID)
	for _, a := range r.Artifacts {
		n += artifactJSONSize(a)
	}
	return n
}

// AppendJSON appends r's JSON encoding to b (see JSONAppender): a
// LangGraph saver's get_tuple reads through it, and encoding/json's
// reflection over each artifact costs as much as the read.
func (r ArtifactsByIDResult) AppendJSON(b []byte) []byte {
	b = grow(b, len(b)+r.JSONSize())
	b = append(b, `{"session_id":`...)
	b = appendString(b, r.SessionID)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, r.Generation, 10)
	b = append(b, `,"artifacts":`...)
	b = appendArray(b, r.Artifacts, appendArtifact)
	b = append(b, `,"next":`...)
	b = strconv.AppendInt(b, r.Next, 10)
	return append(b, '}')
}

// artifactJSONSize bounds the length of appendArtifact(b, a): field names,
// strings escaped at worst 6 bytes a byte, the size, data in base64.
func artifactJSONSize(a session.Artifact) int {
	return 160 + 6*(len(a.ID)+len(a.Kind)+len(a.Name)+len(a.MediaType)+len(a.RunID)+len(a.SHA256)+len(a.Path)) +
		len(a.Metadata) + base64.StdEncoding.EncodedLen(len(a.Data))
}

// appendArtifact appends a as encoding/json encodes a session.Artifact:
// the fields in order, the omitempty ones left out when empty.
func appendArtifact(b []byte, a session.Artifact) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, a.ID)
	for _, f := range [...]struct{ name, v string }{
		{`,"kind":`, a.Kind}, {`,"name":`, a.Name}, {`,"media_type":`, a.MediaType},
		{`,"run_id":`, a.RunID}, {`,"sha256":`, a.SHA256},
	} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendString(b, f.v)
		}
	}
	if a.Size != 0 {
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, a.Size, 10)
	}
	if len(a.Data) > 0 {
		b = append(b, `,"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, a.Data)
		b = append(b, '"')
	}
	if a.Path != "" {
		b = append(b, `,"path":`...)
		b = appendString(b, a.Path)
	}
	if len(a.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		b = append(b, a.Metadata...)
	}
	return append(b, '}')
}
