package fsstore_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// openBench is the store BenchmarkOpen opens: CAIRN_BENCH_OPEN_MB MiB of
// history (default 64) in 8 sessions of agent turns, a message of about
// 2 KB and one of about 6 KB each, 50 turns a commit.
var openBench struct {
	once sync.Once
	dir  string
	size int64
	err  error
}

func openBenchStore(b *testing.B) string {
	b.Helper()
	openBench.once.Do(func() {
		mb := 64
		if v, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_OPEN_MB")); err == nil && v > 0 {
			mb = v
		}
		dir, err := os.MkdirTemp("", "cairn-open-bench-")
		if err != nil {
			openBench.err = err
			return
		}
		openBench.dir = dir
		s, err := fsstore.Open(dir, fsstore.Options{})
		if err != nil {
			openBench.err = err
			return
		}
		defer s.Close()
		small, large := strings.Repeat("u", 2000), strings.Repeat("a", 6000)
		for turn := 0; openBench.size < int64(mb)<<20; {
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
					openBench.err = err
					return
				}
				openBench.size += res.BytesWritten
			}
		}
	})
	if openBench.err != nil {
		b.Fatal(openBench.err)
	}
	return openBench.dir
}

// BenchmarkOpen opens and closes a store with a large history, with its
// index checkpoints (what Open does by default) and without (every log
// walked from the start, as before checkpoints). The history's size is
// reported as history_MiB.
func BenchmarkOpen(b *testing.B) {
	dir := openBenchStore(b)
	defer os.RemoveAll(dir) // the parent runs once, after its sub-benchmarks
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
			b.ReportMetric(float64(openBench.size)/(1<<20), "history_MiB")
		})
	}
}
