package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// BenchmarkPreCommitSync measures the Sync that precedes every commit's
// manifest, on a quiet tree and on one where a file is overwritten just
// before each Sync (the write is inside the timed loop in the busy cases;
// busy/nosync times the write alone), with the fast path and with the
// cookie round trip forced.
func BenchmarkPreCommitSync(b *testing.B) {
	for _, tree := range []string{"quiet", "busy"} {
		for _, path := range []string{"fast", "cookie", "nosync"} {
			if path == "nosync" && tree == "quiet" {
				continue
			}
			b.Run(tree+"/"+path, func(b *testing.B) {
				root := b.TempDir()
				testkit.WriteFile(b, root, "src/main.go", "package main\n")
				tr, err := Open(root, Options{noFastSync: path == "cookie"})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { tr.Close() })
				if tr.Status().Mode != ModeWatching {
					b.Skip("inotify unavailable")
				}
				ctx := context.Background()
				file := filepath.Join(root, "src", "main.go")
				content := []byte("package main // edited\n")
				cookies := tr.cookieSyncs.Load()
				b.ResetTimer()
				for b.Loop() {
					if tree == "busy" {
						if err := os.WriteFile(file, content, 0o644); err != nil {
							b.Fatal(err)
						}
					}
					if path == "nosync" {
						continue
					}
					if err := tr.Sync(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(tr.cookieSyncs.Load()-cookies)/float64(b.N), "cookies/op")
			})
		}
	}
}
