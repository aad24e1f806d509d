package api

import (
	"math"
	"strconv"

	"github.com/cairn-dev/cairn/session"
)

// JSONSize bounds the length of r's AppendJSON (see JSONAppender).
func (r ResumeRunResult) JSONSize() int {
	// The names, four numbers of at most 20 characters and a float of at
	// most 24, with room to spare; strings escaped at worst 6 bytes a byte.
	n := 512 + 6*(len(r.RunID)+len(r.ResumedFrom)+len(r.SessionID)) + len(r.State)
	for _, m := range r.Messages {
		n += max(len(m), len("null")) + 1
	}
	for _, f := range r.FilesTouchedAfterCheckpoint {
		n += 6*len(f) + 3
	}
	return n
}

// AppendJSON appends r's JSON encoding to b (see JSONAppender): the
// messages up to the resumed boundary, which a resume after a crash reads
// whole, copied as they are stored. It returns nil, and the caller
// encodes r with encoding/json (which reports it), for a usage cost that
// is not a finite number.
func (r ResumeRunResult) AppendJSON(b []byte) []byte {
	if !finite(r.Usage.Cost) {
		return nil
	}
	b = grow(b, len(b)+r.JSONSize())
	b = append(b, `{"run_id":`...)
	b = appendString(b, r.RunID)
	b = append(b, `,"resumed_from":`...)
	b = appendString(b, r.ResumedFrom)
	b = append(b, `,"session_id":`...)
	b = appendString(b, r.SessionID)
	b = append(b, `,"messages":`...)
	b = appendArray(b, r.Messages, appendValue)
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, r.Turn, 10)
	b = append(b, `,"usage":`...)
	b = appendUsage(b, r.Usage)
	b = append(b, `,"tool_calls_count":`...)
	b = strconv.AppendInt(b, r.ToolCallsCount, 10)
	if len(r.State) > 0 {
		b = append(b, `,"state":`...)
		b = append(b, r.State...)
	}
	b = append(b, `,"files_touched_after_checkpoint":`...)
	b = appendArray(b, r.FilesTouchedAfterCheckpoint, appendString)
	b = append(b, `,"files_tracked":`...)
	b = strconv.AppendBool(b, r.FilesTracked)
	return append(b, '}')
}

// appendUsage appends u as encoding/json encodes it; u.Cost must be finite.
func appendUsage(b []byte, u session.Usage) []byte {
	b = strconv.AppendInt(append(b, `{"input_tokens":`...), u.InputTokens, 10)
	b = strconv.AppendInt(append(b, `,"output_tokens":`...), u.OutputTokens, 10)
	b = strconv.AppendInt(append(b, `,"total_tokens":`...), u.TotalTokens, 10)
	b = appendFloat(append(b, `,"cost":`...), u.Cost)
	return append(b, '}')
}

// appendFloat appends the finite f as encoding/json writes a float64:
// the shortest decimal that reads back as f, with an exponent only below
// 1e-6 or from 1e21 on, and no leading zero in a negative exponent.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
