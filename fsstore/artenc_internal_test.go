package fsstore

import (
	"bytes"
	"math"
	"testing"

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
