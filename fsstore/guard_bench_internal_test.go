package fsstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

// BenchmarkCommitGuards measures the guards a commit runs around its
// append (appendCommit): the log's identity before (checkLogFile) and the
// writer lock after (checkLockOn), in a store whose workspace is a few
// directories deep, as a project's is.
func BenchmarkCommitGuards(b *testing.B) {
	ws := filepath.Join(b.TempDir(), "home", "user", "src", "project")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	s, err := Open(ws, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for i := 0; i < 2; i++ { // the second commit appends: the log is open
		if _, err := s.Commit(ctx, "a", &session.Change{AppendMessages: []session.Value{session.Value(`"m"`)}}, session.CommitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	s.mu.Lock()
	l := s.sessions["a"].log
	s.mu.Unlock()
	if l == nil {
		b.Fatal("the session's log is not open")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.checkLogFile(l); err != nil {
			b.Fatal(err)
		}
		if err := s.checkLockOn("append to", l.Path()); err != nil {
			b.Fatal(err)
		}
	}
}
