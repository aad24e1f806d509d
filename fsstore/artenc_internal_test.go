package fsstore

import (
	"bytes"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// TestArtifactHeaderEncoding checks that addArtifactHeader frames exactly
// the bytes the CBOR encoder gives an artifact header, for strings of
// every head length, sizes of every sign and width, and metadata or none.
func TestArtifactHeaderEncoding(t *testing.T) {
	str := func(name string) *rapid.Generator[string] {
		// Lengths on each side of every head width's bound.
		edge := rapid.SampledFrom([]int{23, 24, 255, 256, 65535, 65536})
		return rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(20, 300, -1),
			rapid.Custom(func(rt *rapid.T) string {
				return string(bytes.Repeat([]byte("é"), rapid.IntRange(0, 40000).Draw(rt, name)))
			}),
			rapid.Custom(func(rt *rapid.T) string { return string(bytes.Repeat([]byte("x"), edge.Draw(rt, name))) }))
	}
	rapid.Check(t, func(rt *rapid.T) {
		a := session.Artifact{
			ID: str("id").Draw(rt, "id"), Kind: str("kind").Draw(rt, "kind"), Name: str("name").Draw(rt, "name"),
			MediaType: str("mt").Draw(rt, "mt"), RunID: str("run").Draw(rt, "run"), SHA256: str("sha").Draw(rt, "sha"),
			Path: str("path").Draw(rt, "path"),
			Size: rapid.OneOf(rapid.Just(int64(0)), rapid.Int64(), rapid.Just(int64(math.MinInt64)), rapid.Just(int64(math.MaxInt64)),
				rapid.Int64Range(-70000, 70000), rapid.SampledFrom([]int64{23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, -24, -25, -256, -257, -65536, -65537})).Draw(rt, "size"),
		}
		switch rapid.IntRange(0, 2).Draw(rt, "meta") {
		case 1:
			a.Metadata = session.Value{}
		case 2:
			a.Metadata = session.Value(rapid.StringN(1, 70000, -1).Draw(rt, "metadata"))
		}
		want, err := encMode.Marshal(&a)
		if err != nil {
			rt.Fatal(err)
		}
		var fb frameBuf
		fb.addArtifactHeader(&a)
		var got []byte
		recordlog.Scan(fb.buf, 0, func(r recordlog.Record) bool {
			if r.Kind != kindArtifact {
				rt.Fatalf("kind %q", r.Kind)
			}
			got = r.Payload
			return true
		})
		if !bytes.Equal(got, want) {
			rt.Fatalf("artifact %+v:\n got  %x\n want %x", a, got, want)
		}
	})
}

// TestRunAndCheckpointEncoding checks that the run and checkpoint records
// a commit frames by hand (appendRun, appendCheckpoint, or encMode where
// they cannot) hold exactly the bytes the CBOR encoder gives them: times
// zero, in UTC, in another zone and out of RFC 3339's years, floats of
// every kind, integers of every sign and width, optional parts present or
// not.
func TestRunAndCheckpointEncoding(t *testing.T) {
	zone := time.FixedZone("z", -5*3600)
	tm := rapid.Custom(func(rt *rapid.T) time.Time {
		switch rapid.IntRange(0, 4).Draw(rt, "timeKind") {
		case 0:
			return time.Time{}
		case 1:
			return time.Date(2026, 12, 1, 23, 59, 59, rapid.IntRange(0, 999999999).Draw(rt, "ns"), time.UTC)
		case 2:
			return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		case 3:
			return time.Date(2026, 1, 2, 3, 4, 5, 6, zone)
		}
		return time.Date(rapid.SampledFrom([]int{-1, 0, 1, 9999, 10000}).Draw(rt, "year"), 1, 1, 0, 0, 0, 0, time.UTC)
	})
	i64 := rapid.OneOf(rapid.Int64(), rapid.Int64Range(-300, 300), rapid.SampledFrom([]int64{0, 23, 24, 255, 256, 65535, 65536, -24, -25, math.MinInt64, math.MaxInt64}))
	f64 := rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 0.001, 1.5, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64}))
	usage := rapid.Custom(func(rt *rapid.T) session.Usage {
		return session.Usage{InputTokens: i64.Draw(rt, "in"), OutputTokens: i64.Draw(rt, "out"), TotalTokens: i64.Draw(rt, "total"), Cost: f64.Draw(rt, "cost")}
	})
	str := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(20, 300, -1))
	same := func(rt *rapid.T, kind byte, v any, enc func([]byte) ([]byte, bool)) {
		want, werr := encMode.Marshal(v)
		var fb frameBuf
		fb.addHand(kind, v, enc)
		if werr != nil || fb.err != nil {
			if (werr == nil) != (fb.err == nil) {
				rt.Fatalf("%+v: encoder error %v, frame error %v", v, werr, fb.err)
			}
			return
		}
		var got []byte
		recordlog.Scan(fb.buf, 0, func(r recordlog.Record) bool { got = r.Payload; return r.Kind == kind })
		if !bytes.Equal(got, want) {
			rt.Fatalf("%+v:\n got  %x\n want %x", v, got, want)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		r := session.Run{RunID: str.Draw(rt, "run"), Status: str.Draw(rt, "status"), ParentRunID: str.Draw(rt, "parent"),
			StartedAt: tm.Draw(rt, "started"), Usage: usage.Draw(rt, "usage"), ToolCallsCount: i64.Draw(rt, "tools")}
		if rapid.Bool().Draw(rt, "ended") {
			end := tm.Draw(rt, "end")
			r.EndedAt = &end
		}
		same(rt, kindRun, &r, func(b []byte) ([]byte, bool) { return appendRun(b, &r) })
		cp := session.LoopCheckpoint{RunID: str.Draw(rt, "cprun"), SessionID: str.Draw(rt, "sid"), Turn: i64.Draw(rt, "turn"),
			MessageCount: i64.Draw(rt, "count"), Usage: usage.Draw(rt, "cpusage"), ToolCallsCount: i64.Draw(rt, "cptools"),
			CreatedAt: tm.Draw(rt, "created")}
		switch rapid.IntRange(0, 2).Draw(rt, "state") {
		case 1:
			cp.State = session.Value{}
		case 2:
			cp.State = session.Value(rapid.StringN(1, 70000, -1).Draw(rt, "stateBytes"))
		}
		if rapid.Bool().Draw(rt, "files") {
			cp.Files = &session.ManifestRef{ID: str.Draw(rt, "mid"), Clock: str.Draw(rt, "clock"), Entries: i64.Draw(rt, "entries"), Inexact: rapid.Bool().Draw(rt, "inexact")}
		}
		same(rt, kindCheckpoint, &cp, func(b []byte) ([]byte, bool) { return appendCheckpoint(b, &cp) })
	})
}
