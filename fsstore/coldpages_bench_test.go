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
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		for _, w := range ways {
			fsstore.SetJournalPadding(b, w.pad)
			if w.cold {
				if err := dropCache(w.j); err != nil {
					b.Fatal(err)
				}
			}
			took[w.name] = append(took[w.name], timedCommit(b, w.s, i+1))
		}
	}
	b.StopTimer()
	med := reportMedians(b, took)
	b.ReportMetric(med["padded-cold"]/med["padded-hot"], "padded-cold/hot")
	b.ReportMetric(med["unpadded-cold"]/med["unpadded-hot"], "unpadded-cold/hot")
	b.ReportMetric(med["padded-cold"]/med["unpadded-cold"], "cold-padded/unpadded")
}

// timedCommit commits turn i (benchTurn) to session "a" of s and returns
// how long the commit took.
func timedCommit(b *testing.B, s *fsstore.Store, i int) time.Duration {
	c := benchTurn(i)
	t0 := time.Now()
	if _, err := s.Commit(bg, "a", c, session.CommitOptions{}); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// reportMedians reports each way's median commit, in µs, as <way>-us,
// and returns them by way.
func reportMedians(b *testing.B, took map[string][]time.Duration) map[string]float64 {
	med := map[string]float64{}
	for name, all := range took {
		slices.Sort(all)
		med[name] = float64(all[len(all)/2].Microseconds())
		b.ReportMetric(med[name], name+"-us")
	}
	return med
}

// benchTurn is an agent turn's delta: a 2 KB and a 6 KB message.
func benchTurn(i int) *session.Change {
	return &session.Change{AppendMessages: []session.Value{
		session.Value(`{"role":"user","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("u", 2000) + `"}`),
		session.Value(`{"role":"assistant","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("a", 6000) + `"}`),
	}}
}

// dropCache drops f's clean pages from the page cache.
func dropCache(f *os.File) error { return dropRange(f, 0, 0) }

// dropRange drops f's clean pages from off on, n bytes (0: to the end),
// from the page cache.
func dropRange(f *os.File, off, n int64) error {
	const dontNeed = 4 // POSIX_FADV_DONTNEED
	_, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), uintptr(n), dontNeed, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// BenchmarkLogColdPages commits an agent's turn (about 8 KB) to a session
// log without the journal, as the embedded library does (into zeros
// written ahead of the log's end, then fdatasync), three ways in turn,
// one commit each per iteration: the log's pages in the page cache (hot),
// the zeros ahead dropped from it (ahead-cold: the zeros were written up
// to a megabyte ahead, minutes before an agent's commits reach them, and
// a page cache that reclaims cold pages drops them), and every page
// dropped (cold: the block holding the log's last bytes too, after a
// longer pause). An append written only to its own end would make the
// kernel read its last block, in the zeros, from the disk; written out to
// the block's end (recordlog.File's write) it does not. Reported: each
// way's median commit, and each cold way against the hot one.
func BenchmarkLogColdPages(b *testing.B) {
	type way struct {
		name string
		all  bool
		s    *fsstore.Store
		log  *os.File
		took []time.Duration
	}
	ways := []*way{{name: "hot"}, {name: "ahead-cold"}, {name: "cold", all: true}}
	for _, w := range ways {
		root := b.TempDir()
		s, err := fsstore.Open(root, fsstore.Options{PreallocBytes: fsstore.DefaultPreallocBytes})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Commit(bg, "a", benchTurn(0), session.CommitOptions{}); err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(filepath.Join(root, ".cairn", "sessions", "s-a.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w.s, w.log = s, f
	}
	took := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		for _, w := range ways {
			switch {
			case w.all:
				if err := dropCache(w.log); err != nil {
					b.Fatal(err)
				}
			case w.name == "ahead-cold":
				// Every page past the one holding the log's last byte.
				if err := dropRange(w.log, (fsstore.LogSize(w.s, "a")+4095)/4096*4096, 0); err != nil {
					b.Fatal(err)
				}
			}
			took[w.name] = append(took[w.name], timedCommit(b, w.s, i+1))
		}
	}
	b.StopTimer()
	med := reportMedians(b, took)
	b.ReportMetric(med["ahead-cold"]/med["hot"], "ahead-cold/hot")
	b.ReportMetric(med["cold"]/med["hot"], "cold/hot")
}
