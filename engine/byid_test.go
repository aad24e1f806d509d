package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// byIDs returns the ids of r's artifacts, in order.
func byIDs(r api.ArtifactsByIDResult) []string {
	out := make([]string, len(r.Artifacts))
	for i, a := range r.Artifacts {
		out[i] = a.ID
	}
	return out
}

// TestArtifactsByID: the named artifacts the session holds come with their
// data and metadata, in the order named, missing ids skipped, from the
// latest generation; what the read refuses it refuses with a clear code.
func TestArtifactsByID(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := testkit.Context(t)
		e := newEngine(t, f)
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendArtifacts: []session.Artifact{
			{ID: "a", Kind: "k", Data: []byte("alpha")},
			{ID: "b", Data: []byte("beta"), Metadata: session.Value(`{"m":1}`)},
			{ID: "c"},
		}}})
		noErr(t, err)
		// A later commit replaces b and adds d: the read sees both.
		res, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{PutArtifacts: []session.Artifact{
			{ID: "b", Data: []byte("beta2")},
			{ID: "d", Data: []byte("delta")},
		}}})
		noErr(t, err)

		for _, tc := range []struct {
			name string
			ids  []string
			want []string
		}{
			{"order named", []string{"d", "a", "b"}, []string{"d", "a", "b"}},
			{"missing skipped", []string{"x", "b", "nope", "a", "y"}, []string{"b", "a"}},
			{"none present", []string{"x", "y"}, []string{}},
			{"no ids", nil, []string{}},
			{"no data", []string{"c"}, []string{"c"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r, err := e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: tc.ids})
				noErr(t, err)
				if got := byIDs(r); strings.Join(got, ",") != strings.Join(tc.want, ",") || r.Artifacts == nil {
					t.Fatalf("ids %v: got %v, want %v", tc.ids, got, tc.want)
				}
				if r.Next != int64(len(tc.ids)) || r.Generation != res.Generation || r.SessionID != "s" {
					t.Fatalf("next %d generation %d session %q, want %d %d s", r.Next, r.Generation, r.SessionID, len(tc.ids), res.Generation)
				}
			})
		}
		r, err := e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: []string{"b", "a", "c"}})
		noErr(t, err)
		b, a, c := r.Artifacts[0], r.Artifacts[1], r.Artifacts[2]
		if string(b.Data) != "beta2" || b.Size != 5 || len(b.Metadata) != 0 || string(a.Data) != "alpha" || a.Kind != "k" || a.SHA256 == "" || c.Data != nil {
			t.Fatalf("artifacts: %s", mustJSON(t, r.Artifacts))
		}

		tooMany := make([]string, api.MaxArtifactIDs+1)
		for i := range tooMany {
			tooMany[i] = fmt.Sprintf("id%d", i)
		}
		for _, tc := range []struct {
			name string
			sid  string
			ids  []string
			code session.Code
			hint string
		}{
			{"too many ids", "s", tooMany, session.CodeInvalidArgument, fmt.Sprintf("limit of %d", api.MaxArtifactIDs)},
			{"an id twice", "s", []string{"a", "b", "a"}, session.CodeInvalidArgument, `"a" is named twice`},
			{"an invalid id", "s", []string{"a", ""}, session.CodeInvalidArgument, "artifact"},
			{"no session", "nope", []string{"a"}, session.CodeNotFound, "nope"},
			{"an invalid session id", "", []string{"a"}, session.CodeInvalidArgument, "session"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: tc.sid, ArtifactIDs: tc.ids})
				wantCode(t, err, tc.code)
				if !strings.Contains(err.Error(), tc.hint) {
					t.Fatalf("error does not say %q: %v", tc.hint, err)
				}
			})
		}
		// As many ids as the limit allows are fine.
		r, err = e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: append(tooMany[:api.MaxArtifactIDs-1], "a")})
		noErr(t, err)
		if got := byIDs(r); len(got) != 1 || got[0] != "a" {
			t.Fatalf("at the id limit: %v", got)
		}

		// A deleted session holds nothing: not_found, as for any read.
		noErr(t, e.Delete(ctx, "s"))
		_, err = e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: []string{"a"}})
		wantCode(t, err, session.CodeNotFound)
	})
}

// TestArtifactsByIDReplyLimit: an answer stops before the artifact that
// would pass MaxReplyBytes, Next saying where to go on, and reading on from
// Next gets every artifact; one artifact that alone passes the limit is
// too_large, naming it.
func TestArtifactsByIDReplyLimit(t *testing.T) {
	const limit = 16 << 10
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := testkit.Context(t)
		e := engine.New(openStore(t, f), engine.Options{MaxReplyBytes: limit})
		t.Cleanup(func() { _ = e.Close() })
		var arts []session.Artifact
		var ids []string
		for i := range 10 {
			id := fmt.Sprintf("p%d", i)
			arts = append(arts, session.Artifact{ID: id, Data: []byte(strings.Repeat(string(rune('a'+i)), 4<<10))})
			ids = append(ids, id, "missing"+id)
		}
		arts = append(arts, session.Artifact{ID: "big", Data: []byte(strings.Repeat("b", limit))})
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendArtifacts: arts}})
		noErr(t, err)

		var got []string
		pages := 0
		for rest := ids; len(rest) > 0; pages++ {
			r, err := e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: rest})
			noErr(t, err)
			if size := len(mustJSON(t, r)); size > limit {
				t.Fatalf("an answer of %d artifacts is %d bytes, over the limit %d", len(r.Artifacts), size, limit)
			}
			if r.Next <= 0 || r.Next > int64(len(rest)) {
				t.Fatalf("next %d of %d ids", r.Next, len(rest))
			}
			for _, a := range r.Artifacts {
				if len(a.Data) != 4<<10 || a.Data[0] != byte('a'+a.ID[1]-'0') {
					t.Fatalf("artifact %s: %d bytes of %q", a.ID, len(a.Data), a.Data[:1])
				}
			}
			got = append(got, byIDs(r)...)
			rest = rest[r.Next:]
		}
		if len(got) != 10 || got[0] != "p0" || got[9] != "p9" || pages < 3 {
			t.Fatalf("%v in %d answers", got, pages)
		}
		_, err = e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: []string{"missing", "big", "p0"}})
		wantTooLarge(t, err, `artifact "big"`)
		// Before it, what fits comes, and Next points at it.
		r, err := e.ArtifactsByID(ctx, api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: []string{"p0", "missing", "big", "p1"}})
		noErr(t, err)
		if got := byIDs(r); len(got) != 1 || got[0] != "p0" || r.Next != 2 {
			t.Fatalf("before the big one: %v, next %d", got, r.Next)
		}
	})
}

// BenchmarkArtifactsByID reads a checkpoint's three records (a LangGraph
// saver's get_tuple) from a session of 1,000 checkpoints.
func BenchmarkArtifactsByID(b *testing.B) {
	for _, f := range stores {
		b.Run(f.name, func(b *testing.B) {
			st, err := f.open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			e := engine.New(st, engine.Options{})
			defer e.Close()
			ctx := testkit.Context(b)
			for i := range 1000 {
				_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{PutArtifacts: []session.Artifact{
					{ID: fmt.Sprintf("c%d", i), Kind: "langgraph", Data: []byte(strings.Repeat("c", 300))},
					{ID: fmt.Sprintf("w%d", i), Kind: "langgraph", Data: []byte(strings.Repeat("w", 200))},
					{ID: "h", Kind: "langgraph", Data: []byte(fmt.Sprint(i))},
				}}})
				if err != nil {
					b.Fatal(err)
				}
			}
			req := api.ArtifactsByIDRequest{SessionID: "s", ArtifactIDs: []string{"h", "c999", "w999"}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := e.ArtifactsByID(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
