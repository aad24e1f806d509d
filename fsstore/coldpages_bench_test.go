//go:build linux

package fsstore_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// BenchmarkJournalColdPages commits an agent's turn (about 8 KB) through
// the workspace journal, four ways in turn, one commit each per
// iteration: flushes padded to a 4 KiB boundary or not, and the journal's
// pages in the page cache (hot) or dropped before the commit (cold, with
// posix_fadvise DONTNEED: what a page cache that reclaims cold pages does
// to a journal between two flushes that reach the same blocks, hours
// apart at an agent's pace). A flush not padded ends in the middle of a
// block, so the next one starts there and ends in the middle of another:
// when that one is not in the page cache, the kernel reads it from the
// disk before the write. Reported: each way's median commit, and the
// cold ones against the hot ones.
func BenchmarkJournalColdPages(b *testing.B) {
	type way struct {
		name string
		pad  bool
		cold bool
		s    *fsstore.Store
		j    *os.File
		all  []time.Duration
	}
	ways := []*way{{name: "padded-hot", pad: true}, {name: "padded-cold", pad: true, cold: true},
		{name: "unpadded-hot"}, {name: "unpadded-cold", cold: true}}
	for _, w := range ways {
		root := b.TempDir()
		s, err := fsstore.Open(root, fsstore.Options{JournalBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		j, err := os.Open(filepath.Join(root, ".cairn", "sessions", "journal"))
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		w.s, w.j = s, j
		// The log's creation is fdatasynced, not journaled.
		if _, err := s.Commit(bg, "a", benchTurn(0), session.CommitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		for _, w := range ways {
			c := benchTurn(i + 1)
			fsstore.SetJournalPadding(b, w.pad)
			if w.cold {
				if err := dropCache(w.j); err != nil {
					b.Fatal(err)
				}
			}
			t0 := time.Now()
			if _, err := w.s.Commit(bg, "a", c, session.CommitOptions{}); err != nil {
				b.Fatal(err)
			}
			w.all = append(w.all, time.Since(t0))
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for _, w := range ways {
		slices.Sort(w.all)
		med[w.name] = float64(w.all[len(w.all)/2].Microseconds())
		b.ReportMetric(med[w.name], w.name+"-us")
	}
	b.ReportMetric(med["padded-cold"]/med["padded-hot"], "padded-cold/hot")
	b.ReportMetric(med["unpadded-cold"]/med["unpadded-hot"], "unpadded-cold/hot")
	b.ReportMetric(med["padded-cold"]/med["unpadded-cold"], "cold-padded/unpadded")
}

// benchTurn is an agent turn's delta: a 2 KB and a 6 KB message.
func benchTurn(i int) *session.Change {
	return &session.Change{AppendMessages: []session.Value{
		session.Value(`{"role":"user","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("u", 2000) + `"}`),
		session.Value(`{"role":"assistant","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("a", 6000) + `"}`),
	}}
}

// dropCache drops f's clean pages from the page cache.
func dropCache(f *os.File) error {
	const dontNeed = 4 // POSIX_FADV_DONTNEED
	_, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, dontNeed, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
