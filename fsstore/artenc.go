package fsstore

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// addArtifactHeader adds a's header record (kindArtifact): a without its
// data, encoded by hand to exactly the bytes encMode gives it (a map of
// the fields that are not empty, keyed by their JSON names, in
// declaration order), without reflection: a LangGraph saver's put
// writes four of them. TestArtifactHeaderEncoding compares the two.
func (f *frameBuf) addArtifactHeader(a *session.Artifact) {
	if f.err != nil {
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	n := 1 // id has no omitempty
	for _, s := range [...]string{a.Kind, a.Name, a.MediaType, a.RunID, a.SHA256, a.Path} {
		if s != "" {
			n++
		}
	}
	if a.Size != 0 {
		n++
	}
	if len(a.Metadata) > 0 {
		n++
	}
	buf = cborHeadAppend(buf, 5, uint64(n))
	text := func(key, v string, omit bool) {
		if omit && v == "" {
			return
		}
		buf = cborHeadAppend(buf, 3, uint64(len(key)))
		buf = append(buf, key...)
		buf = cborHeadAppend(buf, 3, uint64(len(v)))
		buf = append(buf, v...)
	}
	text("id", a.ID, false)
	text("kind", a.Kind, true)
	text("name", a.Name, true)
	text("media_type", a.MediaType, true)
	text("run_id", a.RunID, true)
	text("sha256", a.SHA256, true)
	if a.Size != 0 {
		buf = cborHeadAppend(buf, 3, 4)
		buf = append(buf, "size"...)
		if a.Size > 0 {
			buf = cborHeadAppend(buf, 0, uint64(a.Size))
		} else {
			buf = cborHeadAppend(buf, 1, uint64(-(a.Size + 1)))
		}
	}
	text("path", a.Path, true)
	if len(a.Metadata) > 0 {
		buf = cborHeadAppend(buf, 3, 8)
		buf = append(buf, "metadata"...)
		buf = cborHeadAppend(buf, 2, uint64(len(a.Metadata)))
		buf = append(buf, a.Metadata...)
	}
	f.buf = buf
	recordlog.Seal(f.buf, start, kindArtifact)
	f.recs++
	f.indexed(kindArtifact, a, start)
}

// cborHeadAppend appends the shortest head of an item of major type major
// and argument arg, as encMode writes it.
func cborHeadAppend(b []byte, major byte, arg uint64) []byte {
	m := major << 5
	switch {
	case arg < 24:
		return append(b, m|byte(arg))
	case arg <= 0xff:
		return append(b, m|24, byte(arg))
	case arg <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(arg))
	case arg <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(arg))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), arg)
}

// cborEnc appends CBOR items as encMode writes them, for the few record
// types a commit of an agent's turn writes every time; what it cannot
// write exactly as encMode does (a time out of UTC or of years 1-9999, a
// float that is not finite) it reports, and the caller lets encMode
// encode the whole value instead.
type cborEnc struct {
	b  []byte
	ok bool
}

func (e *cborEnc) head(major byte, n uint64) { e.b = cborHeadAppend(e.b, major, n) }

func (e *cborEnc) key(k string) { e.text(k) }

func (e *cborEnc) text(s string) {
	e.head(3, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *cborEnc) int(v int64) {
	if v >= 0 {
		e.head(0, uint64(v))
	} else {
		e.head(1, uint64(-(v + 1)))
	}
}

func (e *cborEnc) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.ok = false
		return
	}
	e.b = binary.BigEndian.AppendUint64(append(e.b, 0xfb), math.Float64bits(f))
}

func (e *cborEnc) time(t time.Time) {
	if t.IsZero() {
		e.b = append(e.b, 0xf6) // null
		return
	}
	if t.Location() != time.UTC || t.Year() < 1 || t.Year() > 9999 {
		e.ok = false
		return
	}
	var buf [40]byte
	s := t.AppendFormat(buf[:0], time.RFC3339Nano)
	e.head(3, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *cborEnc) usage(u session.Usage) {
	e.head(5, 4)
	e.key("input_tokens")
	e.int(u.InputTokens)
	e.key("output_tokens")
	e.int(u.OutputTokens)
	e.key("total_tokens")
	e.int(u.TotalTokens)
	e.key("cost")
	e.float(u.Cost)
}

func (e *cborEnc) manifest(m *session.ManifestRef) {
	n := 0
	for _, set := range [...]bool{m.ID != "", m.Clock != "", m.Entries != 0, m.Inexact} {
		if set {
			n++
		}
	}
	e.head(5, uint64(n))
	if m.ID != "" {
		e.key("id")
		e.text(m.ID)
	}
	if m.Clock != "" {
		e.key("clock")
		e.text(m.Clock)
	}
	if m.Entries != 0 {
		e.key("entries")
		e.int(m.Entries)
	}
	if m.Inexact {
		e.key("inexact")
		e.b = append(e.b, 0xf5)
	}
}

// appendCheckpoint appends cp as encMode encodes a *session.LoopCheckpoint.
func appendCheckpoint(b []byte, cp *session.LoopCheckpoint) ([]byte, bool) {
	e := cborEnc{b: b, ok: true}
	n := 7
	if len(cp.State) > 0 {
		n++
	}
	if cp.Files != nil {
		n++
	}
	e.head(5, uint64(n))
	e.key("run_id")
	e.text(cp.RunID)
	e.key("session_id")
	e.text(cp.SessionID)
	e.key("turn")
	e.int(cp.Turn)
	e.key("message_count")
	e.int(cp.MessageCount)
	e.key("usage")
	e.usage(cp.Usage)
	e.key("tool_calls_count")
	e.int(cp.ToolCallsCount)
	if len(cp.State) > 0 {
		e.key("state")
		e.head(2, uint64(len(cp.State)))
		e.b = append(e.b, cp.State...)
	}
	e.key("created_at")
	e.time(cp.CreatedAt)
	if cp.Files != nil {
		e.key("files")
		e.manifest(cp.Files)
	}
	return e.b, e.ok
}

// appendRun appends r as encMode encodes a *session.Run.
func appendRun(b []byte, r *session.Run) ([]byte, bool) {
	e := cborEnc{b: b, ok: true}
	n := 5
	if r.ParentRunID != "" {
		n++
	}
	if r.EndedAt != nil {
		n++
	}
	e.head(5, uint64(n))
	e.key("run_id")
	e.text(r.RunID)
	e.key("status")
	e.text(r.Status)
	if r.ParentRunID != "" {
		e.key("parent_run_id")
		e.text(r.ParentRunID)
	}
	e.key("started_at")
	e.time(r.StartedAt)
	if r.EndedAt != nil {
		e.key("ended_at")
		e.time(*r.EndedAt)
	}
	e.key("usage")
	e.usage(r.Usage)
	e.key("tool_calls_count")
	e.int(r.ToolCallsCount)
	return e.b, e.ok
}

// addHand adds a record of kind whose payload enc appends, or, when enc
// cannot write v exactly as encMode would, one encMode encodes.
func (f *frameBuf) addHand(kind byte, v any, enc func([]byte) ([]byte, bool)) {
	if f.err != nil {
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	out, ok := enc(buf)
	if !ok {
		f.add(kind, v)
		return
	}
	f.buf = out
	recordlog.Seal(f.buf, start, kind)
	f.recs++
	f.indexed(kind, v, start)
}
