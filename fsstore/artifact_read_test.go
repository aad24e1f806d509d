package fsstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestArtifactByIDIsFlat: reading one artifact by id allocates about the
// same whatever the number of artifacts the session holds, so the read
// costs what it returns (framework adapters read one artifact per call in
// sessions of tens of thousands). Bytes allocated are counted, not time.
func TestArtifactByIDIsFlat(t *testing.T) {
	bg := context.Background()
	s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	perRead := func(id string, n int) uint64 {
		t.Helper()
		for i := 0; i < n; i += 500 {
			var arts []session.Artifact
			for j := i; j < i+500 && j < n; j++ {
				arts = append(arts, session.Artifact{ID: fmt.Sprintf("artifact-%06d", j), Data: []byte("x")})
			}
			if _, err := s.Commit(bg, id, &session.Change{PutArtifacts: arts}, session.CommitOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		read := func() {
			p, err := s.Artifacts(bg, id, []string{"artifact-000003"}, true)
			if err != nil || len(p.Items) != 1 || string(p.Items[0].Data) != "x" {
				t.Fatalf("Artifacts(%s): %v %+v", id, err, p)
			}
		}
		read()
		const reads = 20
		return allocated(func() {
			for range reads {
				read()
			}
		}) / reads
	}
	small, large := perRead("small", 10), perRead("large", 20000)
	if large > 2*small+4096 {
		t.Fatalf("one artifact by id allocates %d bytes in a session of 20000 artifacts, %d in one of 10", large, small)
	}
}
