package fsstore

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// framed returns the payload of the one record of kind fb holds.
func framed(rt *rapid.T, fb *frameBuf, kind byte) []byte {
	var got []byte
	n := 0
	recordlog.Scan(fb.buf, 0, func(r recordlog.Record) bool {
		if r.Kind != kind {
			rt.Fatalf("kind %q, want %q", r.Kind, kind)
		}
		got, n = r.Payload, n+1
		return true
	})
	if n != 1 || fb.err != nil {
		rt.Fatalf("%d records framed, error %v", n, fb.err)
	}
	return got
}

// edgeInt draws integers on each side of every CBOR head width's bound.
func edgeInt(name string) *rapid.Generator[int64] {
	return rapid.OneOf(rapid.Int64(), rapid.Int64Range(-70000, 70000),
		rapid.SampledFrom([]int64{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxInt64,
			-1, -24, -25, -256, -257, -65536, -65537, -1 << 32, -1<<32 - 1, math.MinInt64}))
}

// TestCommitRecordEncoding checks that addCommit frames exactly the bytes
// the CBOR encoder gives a commitRec, for integers of every sign and head
// width and times of every kind: zero, before year 0 and after 9999
// (which the encoder refuses, failing the commit), in
// other zones, with and without nanoseconds and a monotonic reading.
func TestCommitRecordEncoding(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("x", 2*3600+30*60), time.FixedZone("y", -11*3600), time.Local}
	rapid.Check(t, func(rt *rapid.T) {
		var tm time.Time
		switch rapid.IntRange(0, 3).Draw(rt, "time") {
		case 1:
			tm = time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(rt, "sec"), rapid.Int64Range(0, 999999999).Draw(rt, "nsec"))
		case 2:
			tm = time.Unix(rapid.Int64Range(1<<30, 1<<31).Draw(rt, "sec"), rapid.SampledFrom([]int64{0, 1, 100, 120000000, 999999999}).Draw(rt, "nsec"))
		case 3:
			tm = time.Now() // with a monotonic reading
		}
		tm = tm.In(rapid.SampledFrom(zones).Draw(rt, "zone"))
		rec := commitRec{
			Schema: int(edgeInt("schema").Draw(rt, "schema")), Generation: rapid.OneOf(rapid.Uint64(), rapid.Uint64Range(0, 70000),
				rapid.SampledFrom([]uint64{1<<32 - 1, 1 << 32, math.MaxUint64})).Draw(rt, "gen"),
			Time: tm, Records: int(edgeInt("records").Draw(rt, "records")), Bytes: edgeInt("bytes").Draw(rt, "bytes"),
		}
		want, err := encMode.Marshal(rec)
		var fb frameBuf
		fb.addCommit(rec)
		if err != nil {
			if fb.err == nil {
				rt.Fatalf("%+v: framed, but the encoder fails: %v", rec, err)
			}
			return
		}
		if got := framed(rt, &fb, kindCommit); !bytes.Equal(got, want) {
			rt.Fatalf("%+v:\n got  %x\n want %x", rec, got, want)
		}
	})
}

// TestMessagesRecordEncoding checks that addMessages frames exactly the
// bytes the CBOR encoder gives a []session.Value, for messages of every
// head width, empty ones and nil ones (which the encoder's own path
// takes), and that what it indexes is what indexValue parses back.
func TestMessagesRecordEncoding(t *testing.T) {
	msg := rapid.OneOf(
		rapid.Custom(func(rt *rapid.T) session.Value { return session.Value(rapid.StringN(0, 300, -1).Draw(rt, "s")) }),
		rapid.Custom(func(rt *rapid.T) session.Value {
			return bytes.Repeat([]byte("x"), rapid.SampledFrom([]int{0, 23, 24, 255, 256, 65535, 65536}).Draw(rt, "n"))
		}),
		rapid.Just(session.Value(nil)))
	rapid.Check(t, func(rt *rapid.T) {
		vs := rapid.SliceOfN(msg, 1, 30).Draw(rt, "msgs")
		want, err := encMode.Marshal(vs)
		if err != nil {
			rt.Fatal(err)
		}
		indexing := rapid.Bool().Draw(rt, "indexing")
		fb := frameBuf{indexing: indexing}
		fb.addMessages(kindMessages, vs)
		if slices.ContainsFunc(vs, func(v session.Value) bool { return v == nil }) && indexing {
			if fb.err == nil {
				rt.Fatal("a nil message was indexed")
			}
			return
		}
		got := framed(rt, &fb, kindMessages)
		if !bytes.Equal(got, want) {
			rt.Fatalf("%q:\n got  %x\n want %x", vs, got, want)
		}
		if !indexing {
			return
		}
		p, err := indexValue(kindMessages, vs, got)
		if err != nil {
			rt.Fatal(err)
		}
		if len(fb.index) != 1 || !slices.Equal(fb.index[0].sizes, p.sizes) || fb.index[0].size != int64(len(fb.buf)) || fb.index[0].end != int64(len(fb.buf)) {
			rt.Fatalf("indexed %+v, want sizes %v and the frame's end and size %d", fb.index, p.sizes, len(fb.buf))
		}
	})
}
