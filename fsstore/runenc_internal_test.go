package fsstore

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/session"
)

// edgeTime draws times the encoder writes (zero, any second and
// nanosecond, in zones east and west, with a monotonic reading) and times
// it refuses (years outside 0 to 9999, zone offsets of 24 hours or more).
func edgeTime(name string) *rapid.Generator[time.Time] {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("x", 2*3600+30*60), time.FixedZone("y", -11*3600),
		time.FixedZone("edge", 23*3600+59*60+59), time.FixedZone("day", 24*3600), time.FixedZone("-day", -24*3600), time.FixedZone("s", 30)}
	return rapid.Custom(func(rt *rapid.T) time.Time {
		var tm time.Time
		switch rapid.IntRange(0, 3).Draw(rt, name+"-kind") {
		case 1:
			tm = time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(rt, name+"-sec"), rapid.Int64Range(0, 999999999).Draw(rt, name+"-nsec"))
		case 2:
			tm = time.Unix(rapid.Int64Range(1<<30, 1<<31).Draw(rt, name+"-sec"), rapid.SampledFrom([]int64{0, 1, 100, 120000000}).Draw(rt, name+"-nsec"))
		case 3:
			tm = time.Now()
		}
		return tm.In(rapid.SampledFrom(zones).Draw(rt, name+"-zone"))
	})
}

func edgeFloat(name string) *rapid.Generator[float64] {
	return rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 0.5, 1e-320, math.MaxFloat64,
		math.NaN(), math.Inf(1), math.Inf(-1)}))
}

func edgeText(name string) *rapid.Generator[string] {
	return rapid.OneOf(rapid.StringN(0, 40, -1), rapid.Just(""),
		rapid.Custom(func(rt *rapid.T) string {
			return string(bytes.Repeat([]byte("r"), rapid.SampledFrom([]int{23, 24, 255, 256, 65536}).Draw(rt, name+"-n")))
		}))
}

func drawUsage(rt *rapid.T) session.Usage {
	return session.Usage{InputTokens: edgeInt("in").Draw(rt, "in"), OutputTokens: edgeInt("out").Draw(rt, "out"),
		TotalTokens: edgeInt("total").Draw(rt, "total"), Cost: edgeFloat("cost").Draw(rt, "cost")}
}

// sameRecord checks that hand framed the record the encoder's path
// (frameBuf.add) frames for v: the same payload, or a failure where the
// encoder fails, and the same index entry.
func sameRecord(rt *rapid.T, kind byte, v any, hand func(*frameBuf)) {
	byHand := frameBuf{indexing: true}
	hand(&byHand)
	byEncoder := frameBuf{indexing: true}
	byEncoder.add(kind, v)
	if byEncoder.err != nil {
		if byHand.err == nil {
			rt.Fatalf("%+v: framed, but the encoder fails: %v", v, byEncoder.err)
		}
		return
	}
	if got, want := framed(rt, &byHand, kind), framed(rt, &byEncoder, kind); !bytes.Equal(got, want) {
		rt.Fatalf("%+v:\n got  %x\n want %x", v, got, want)
	}
	// (A NaN, to which reflect.DeepEqual finds NaN unequal, takes the
	// encoder's own path, so its index entry is the same by construction.)
	if !reflect.DeepEqual(byHand.index, byEncoder.index) && !strings.Contains(fmt.Sprint(v), "NaN") {
		rt.Fatalf("%+v: indexed %+v, want %+v", v, byHand.index, byEncoder.index)
	}
}

// TestRunRecordEncoding checks that addRun frames exactly the bytes the
// CBOR encoder gives a session.Run, and indexes it alike, for every field
// set and unset, integers of every head width, floats that are not finite
// and times the encoder refuses.
func TestRunRecordEncoding(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		r := session.Run{RunID: edgeText("run").Draw(rt, "run"), Status: edgeText("status").Draw(rt, "status"),
			ParentRunID: edgeText("parent").Draw(rt, "parent"), StartedAt: edgeTime("started").Draw(rt, "started"),
			Usage: drawUsage(rt), ToolCallsCount: edgeInt("tools").Draw(rt, "tools")}
		if rapid.Bool().Draw(rt, "ended") {
			e := edgeTime("ended").Draw(rt, "ended_at")
			r.EndedAt = &e
		}
		sameRecord(rt, kindRun, &r, func(fb *frameBuf) { fb.addRun(&r) })
	})
}

// TestCheckpointRecordEncoding is TestRunRecordEncoding for addCheckpoint
// and a session.LoopCheckpoint, with and without state and files.
func TestCheckpointRecordEncoding(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cp := session.LoopCheckpoint{RunID: edgeText("run").Draw(rt, "run"), SessionID: edgeText("session").Draw(rt, "session"),
			Turn: edgeInt("turn").Draw(rt, "turn"), MessageCount: edgeInt("messages").Draw(rt, "messages"), Usage: drawUsage(rt),
			ToolCallsCount: edgeInt("tools").Draw(rt, "tools"), CreatedAt: edgeTime("created").Draw(rt, "created")}
		switch rapid.IntRange(0, 2).Draw(rt, "state") {
		case 1:
			cp.State = session.Value{}
		case 2:
			cp.State = session.Value(edgeText("state").Draw(rt, "state_text"))
		}
		if rapid.Bool().Draw(rt, "files") {
			cp.Files = drawManifest(rt)
		}
		sameRecord(rt, kindCheckpoint, &cp, func(fb *frameBuf) { fb.addCheckpoint(&cp) })
	})
}

// TestFilesRecordEncoding is TestRunRecordEncoding for addFiles and a
// session.ManifestRef.
func TestFilesRecordEncoding(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := drawManifest(rt)
		sameRecord(rt, kindFiles, m, func(fb *frameBuf) { fb.addFiles(m) })
	})
}

func drawManifest(rt *rapid.T) *session.ManifestRef {
	return &session.ManifestRef{ID: edgeText("id").Draw(rt, "id"), Clock: edgeText("clock").Draw(rt, "clock"),
		Entries: edgeInt("entries").Draw(rt, "entries"), Inexact: rapid.Bool().Draw(rt, "inexact")}
}
