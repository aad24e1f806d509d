package fsstore_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// buildOpenBench makes the store BenchmarkOpen opens: CAIRN_BENCH_OPEN_MB
// MiB of history (default 64) in 8 sessions of agent turns, a message of
// about 2 KB and one of about 6 KB each, 50 turns a commit. It returns the
// workspace and the bytes of history.
func buildOpenBench(b *testing.B) (string, int64) {
	b.Helper()
	mb := 64
	if v, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_OPEN_MB")); err == nil && v > 0 {
		mb = v
	}
	dir, err := os.MkdirTemp("", "cairn-open-bench-")
	if err != nil {
		b.Fatal(err)
	}
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	small, large := strings.Repeat("u", 2000), strings.Repeat("a", 6000)
	var size int64
	for turn := 0; size < int64(mb)<<20; {
		for i := 0; i < 8; i++ {
			var c session.Change
			for k := 0; k < 50; k++ {
				turn++
				c.AppendMessages = append(c.AppendMessages,
					session.Value(fmt.Sprintf(`{"role":"user","turn":%d,"text":%q}`, turn, small)),
					session.Value(fmt.Sprintf(`{"role":"assistant","turn":%d,"text":%q}`, turn, large)))
			}
			res, err := s.Commit(bg, fmt.Sprint("agent-", i), &c, session.CommitOptions{})
			if err != nil {
				s.Close()
				os.RemoveAll(dir)
				b.Fatal(err)
			}
			size += res.BytesWritten
		}
	}
	if err := s.Close(); err != nil { // writes the checkpoints
		os.RemoveAll(dir)
		b.Fatal(err)
	}
	return dir, size
}

// BenchmarkOpen opens and closes a store with a large history, with its
// index checkpoints (what Open does by default) and without (every log
// walked from the start, as before checkpoints). The history's size is
// reported as history_MiB.
func BenchmarkOpen(b *testing.B) {
	dir, size := buildOpenBench(b)
	defer os.RemoveAll(dir) // the parent runs once per count, around its sub-benchmarks
	for _, bc := range []struct {
		name string
		opts fsstore.Options
	}{
		{"checkpoints", fsstore.Options{}},
		{"full-walk", fsstore.Options{IndexCheckpointBytes: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s, err := fsstore.Open(dir, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := s.List(bg); err != nil || len(n) != 8 {
					b.Fatalf("list: %d sessions, %v", len(n), err)
				}
				b.StopTimer()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(size)/(1<<20), "history_MiB")
		})
	}
}
