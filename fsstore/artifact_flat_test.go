package fsstore_test

import (
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestOneArtifactIsFlat checks that reading one artifact by id costs the
// same in a session of a few artifacts as in one of thousands (a
// LangGraph saver reads checkpoints by id on every get): measured in the
// bytes a read allocates, which a scan of the session's artifact list
// grows with.
func TestOneArtifactIsFlat(t *testing.T) {
	perRead := func(n int) uint64 {
		s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
		must(t, err)
		defer s.Close()
		for i := 0; i < n; i += 100 {
			var c session.Change
			for j := i; j < min(i+100, n); j++ {
				c.PutArtifacts = append(c.PutArtifacts, session.Artifact{ID: fmt.Sprintf("ck-%d", j), Data: []byte("checkpoint")})
			}
			_, err := s.Commit(bg, "s", &c, session.CommitOptions{})
			must(t, err)
		}
		read := func() {
			p, err := s.Artifacts(bg, "s", []string{"ck-3"}, true)
			if err != nil || len(p.Items) != 1 || p.Items[0].ID != "ck-3" || string(p.Items[0].Data) != "checkpoint" {
				t.Fatalf("artifact ck-3 of %d: %+v %v", n, p.Items, err)
			}
		}
		read()
		const reads = 50
		return allocated(func() {
			for range reads {
				read()
			}
		}) / reads
	}
	small, large := perRead(10), perRead(9000)
	if large > 2*small+4096 {
		t.Fatalf("one artifact read allocates %d bytes among 9000 artifacts, %d among 10: it scans the list", large, small)
	}
}
