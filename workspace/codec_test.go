package workspace

import (
	"io/fs"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/internal/recordlog"
)

// TestDeltaCodecRoundTrip checks that any delta decodes to what was
// encoded, and that any truncation of its frame is rejected by scanLog as a
// torn tail rather than misread.
func TestDeltaCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seq := rapid.Uint64Range(1, 1<<40).Draw(t, "seq")
		n := rapid.IntRange(0, 20).Draw(t, "ops")
		ops := make([]mop, n)
		for i := range ops {
			ops[i].path = rapid.StringN(1, 40, -1).Draw(t, "path")
			ops[i].del = rapid.Bool().Draw(t, "del")
			if !ops[i].del {
				ops[i].rec = mrec{
					size:  rapid.Int64Range(0, 1<<40).Draw(t, "size"),
					mtime: rapid.Int64().Draw(t, "mtime"),
					ctime: rapid.Int64().Draw(t, "ctime"),
					mode:  fs.FileMode(rapid.Uint32().Draw(t, "mode")),
					flags: rapid.Uint8().Draw(t, "flags"),
				}
				copy(ops[i].rec.hash[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "hash"))
			}
		}
		frame := encodeDelta(seq, ops)
		gotSeq, got, err := decodeDelta(frame[recordlog.HeaderSize:])
		if err != nil || gotSeq != seq || len(got) != len(ops) {
			t.Fatalf("decode: seq %d ops %d err %v", gotSeq, len(got), err)
		}
		for i := range ops {
			if got[i] != ops[i] {
				t.Fatalf("op %d = %+v, want %+v", i, got[i], ops[i])
			}
		}
		log := append([]byte(logMagic), frame...)
		cut := rapid.IntRange(len(logMagic), len(log)).Draw(t, "cut")
		valid, err := scanLog(log[:cut], seq-1, func(uint64, []mop) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if want := len(logMagic); cut < len(log) && valid != want {
			t.Fatalf("a frame cut at %d of %d was accepted (valid prefix %d)", cut, len(log), valid)
		}
		if cut == len(log) && valid != len(log) {
			t.Fatalf("the whole frame was rejected")
		}
	})
}
