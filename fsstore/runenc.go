package fsstore

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// Every run checkpoint writes a run record and a checkpoint record beside
// its messages, and in a tracked workspace a manifest reference record:
// these are encoded by hand too, to exactly the bytes
// encMode gives them (a map of the fields that are not omitted, keyed by
// their JSON names, in declaration order; times as RFC 3339 text with
// nanoseconds, null when zero; floats as 64-bit floats), without
// reflection. TestRunRecordEncoding and TestCheckpointRecordEncoding
// compare the two. A value the encoder would refuse or write otherwise
// (a time RFC 3339 cannot hold, a NaN or an infinite cost) takes the
// encoder's own path.

// addRun adds the run record of r (kindRun).
func (f *frameBuf) addRun(r *session.Run) {
	if f.err != nil {
		return
	}
	if !timeEncodable(r.StartedAt) || (r.EndedAt != nil && !timeEncodable(*r.EndedAt)) || !finite(r.Usage.Cost) {
		f.add(kindRun, r)
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	n := uint64(5)
	if r.ParentRunID != "" {
		n++
	}
	if r.EndedAt != nil {
		n++
	}
	buf = cborHeadAppend(buf, 5, n)
	buf = cborTextAppend(cborTextAppend(buf, "run_id"), r.RunID)
	buf = cborTextAppend(cborTextAppend(buf, "status"), r.Status)
	if r.ParentRunID != "" {
		buf = cborTextAppend(cborTextAppend(buf, "parent_run_id"), r.ParentRunID)
	}
	buf = cborTimeAppend(cborTextAppend(buf, "started_at"), r.StartedAt)
	if r.EndedAt != nil {
		buf = cborTimeAppend(cborTextAppend(buf, "ended_at"), *r.EndedAt)
	}
	buf = cborUsageAppend(cborTextAppend(buf, "usage"), &r.Usage)
	buf = cborIntAppend(cborTextAppend(buf, "tool_calls_count"), r.ToolCallsCount)
	f.sealed(buf, start, kindRun, r)
}

// addCheckpoint adds the checkpoint record of cp (kindCheckpoint).
func (f *frameBuf) addCheckpoint(cp *session.LoopCheckpoint) {
	if f.err != nil {
		return
	}
	if !timeEncodable(cp.CreatedAt) || !finite(cp.Usage.Cost) {
		f.add(kindCheckpoint, cp)
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	n := uint64(7)
	if len(cp.State) > 0 {
		n++
	}
	if cp.Files != nil {
		n++
	}
	buf = cborHeadAppend(buf, 5, n)
	buf = cborTextAppend(cborTextAppend(buf, "run_id"), cp.RunID)
	buf = cborTextAppend(cborTextAppend(buf, "session_id"), cp.SessionID)
	buf = cborIntAppend(cborTextAppend(buf, "turn"), cp.Turn)
	buf = cborIntAppend(cborTextAppend(buf, "message_count"), cp.MessageCount)
	buf = cborUsageAppend(cborTextAppend(buf, "usage"), &cp.Usage)
	buf = cborIntAppend(cborTextAppend(buf, "tool_calls_count"), cp.ToolCallsCount)
	if len(cp.State) > 0 {
		buf = cborHeadAppend(cborTextAppend(buf, "state"), 2, uint64(len(cp.State)))
		buf = append(buf, cp.State...)
	}
	buf = cborTimeAppend(cborTextAppend(buf, "created_at"), cp.CreatedAt)
	if cp.Files != nil {
		buf = cborManifestAppend(cborTextAppend(buf, "files"), cp.Files)
	}
	f.sealed(buf, start, kindCheckpoint, cp)
}

// addFiles adds the workspace manifest reference record of m (kindFiles),
// which a commit in a tracked workspace writes.
func (f *frameBuf) addFiles(m *session.ManifestRef) {
	if f.err != nil {
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	f.sealed(cborManifestAppend(buf, m), start, kindFiles, m)
}

// sealed frames the record of kind that buf holds from start (after
// recordlog.Reserve), as f's buffer, and indexes v, its value.
func (f *frameBuf) sealed(buf []byte, start int, kind byte, v any) {
	f.buf = buf
	recordlog.Seal(f.buf, start, kind)
	f.recs++
	f.indexed(kind, v, start)
}

// cborManifestAppend appends m as encMode encodes a session.ManifestRef:
// every field is omitted when empty.
func cborManifestAppend(b []byte, m *session.ManifestRef) []byte {
	n := uint64(0)
	for _, set := range [...]bool{m.ID != "", m.Clock != "", m.Entries != 0, m.Inexact} {
		if set {
			n++
		}
	}
	b = cborHeadAppend(b, 5, n)
	if m.ID != "" {
		b = cborTextAppend(cborTextAppend(b, "id"), m.ID)
	}
	if m.Clock != "" {
		b = cborTextAppend(cborTextAppend(b, "clock"), m.Clock)
	}
	if m.Entries != 0 {
		b = cborIntAppend(cborTextAppend(b, "entries"), m.Entries)
	}
	if m.Inexact {
		b = append(cborTextAppend(b, "inexact"), 0xf5)
	}
	return b
}

// cborUsageAppend appends u as encMode encodes a session.Usage.
func cborUsageAppend(b []byte, u *session.Usage) []byte {
	b = append(b, 5<<5|4)
	b = cborIntAppend(cborTextAppend(b, "input_tokens"), u.InputTokens)
	b = cborIntAppend(cborTextAppend(b, "output_tokens"), u.OutputTokens)
	b = cborIntAppend(cborTextAppend(b, "total_tokens"), u.TotalTokens)
	b = append(cborTextAppend(b, "cost"), 0xfb)
	return binary.BigEndian.AppendUint64(b, math.Float64bits(u.Cost))
}

// cborTextAppend appends s as a CBOR text string.
func cborTextAppend(b []byte, s string) []byte {
	return append(cborHeadAppend(b, 3, uint64(len(s))), s...)
}

// cborTimeAppend appends t as encMode encodes a time.Time: null when zero,
// else its RFC 3339 text with nanoseconds. t must be timeEncodable.
func cborTimeAppend(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0xf6)
	}
	var room [64]byte
	s := t.AppendFormat(room[:0], time.RFC3339Nano)
	b = cborHeadAppend(b, 3, uint64(len(s)))
	return append(b, s...)
}

// timeEncodable reports whether encMode writes t as cborTimeAppend does:
// RFC 3339 holds years 0 to 9999 and zone offsets under 24 hours, and the
// encoder refuses any other time.
func timeEncodable(t time.Time) bool {
	if t.IsZero() {
		return true
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off > -24*3600 && off < 24*3600
}

// finite reports whether x is neither NaN nor infinite: encMode writes
// those in half precision, which cborUsageAppend does not.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
