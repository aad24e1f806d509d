package pgstore_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
)

// TestArtifactsByID: the named artifacts come in the order named, missing
// ids skipped, an artifact of several chunks whole, from the session's
// generation; fit sees each one's metadata before its bytes are read, and
// the page stops at the first it refuses, Next pointing at it.
func TestArtifactsByID(t *testing.T) {
	srv := pgtest.Start(t)
	s := openQuiet(t, newDB(t, srv))
	big := bytes.Repeat([]byte("xyz"), (2*pgstore.ChunkSize+5)/3)
	if _, err := s.Commit(ctx, "s", &session.Change{AppendArtifacts: []session.Artifact{
		{ID: "a", Data: []byte("alpha")}, {ID: "big", Data: big}, {ID: "empty", Kind: "k"},
	}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Commit(ctx, "s", &session.Change{PutArtifacts: []session.Artifact{{ID: "a", Data: []byte("alpha2")}}}, session.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	all := func(a session.Artifact) bool {
		if a.Data != nil {
			t.Errorf("fit saw the bytes of %q", a.ID)
		}
		asked = append(asked, a.ID)
		return true
	}
	p, err := s.ArtifactsByID(ctx, "s", []string{"nope", "big", "empty", "x", "a"}, all)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range p.Items {
		got = append(got, a.ID)
	}
	if strings.Join(got, ",") != "big,empty,a" || strings.Join(asked, ",") != "big,empty,a" || p.Next != 5 || p.Total != 3 || p.Generation != res.Generation {
		t.Fatalf("got %v (fit asked %v), next %d, total %d, generation %d", got, asked, p.Next, p.Total, p.Generation)
	}
	if !bytes.Equal(p.Items[0].Data, big) || p.Items[1].Data != nil || string(p.Items[2].Data) != "alpha2" || p.Items[1].Kind != "k" {
		t.Fatalf("data: %d bytes of big, empty %q, a %q", len(p.Items[0].Data), p.Items[1].Data, p.Items[2].Data)
	}

	// fit refusing the second present artifact ends the page before it,
	// even though it would take the third.
	n := 0
	p, err = s.ArtifactsByID(ctx, "s", []string{"a", "x", "big", "empty"}, func(session.Artifact) bool { n++; return n != 2 })
	if err != nil || len(p.Items) != 1 || p.Items[0].ID != "a" || p.Next != 2 {
		t.Fatalf("a refused second artifact: %+v, %v; want a, next 2", p, err)
	}

	if _, err := s.ArtifactsByID(ctx, "nope", []string{"a"}, all); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("a missing session: %v, want not_found", err)
	}
	if _, err := s.ArtifactsByID(ctx, "s", []string{"a", ""}, all); session.CodeOf(err) != session.CodeInvalidArgument {
		t.Fatalf("an invalid id: %v, want invalid_argument", err)
	}
}
