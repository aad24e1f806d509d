//go:build linux

package fsstore_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

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
	b.Cleanup(func() { fsstore.SetJournalPadding(true) })
	var ways []*coldWay
	for _, w := range []struct {
		name      string
		pad, cold bool
	}{{"padded-hot", true, false}, {"padded-cold", true, true}, {"unpadded-hot", false, false}, {"unpadded-cold", false, true}} {
		s, j := coldStore(b, fsstore.Options{JournalBytes: 1 << 20}, "journal")
		ways = append(ways, &coldWay{name: w.name, s: s, ready: func() error {
			fsstore.SetJournalPadding(w.pad)
			if w.cold {
				return dropPages(j, 0)
			}
			return nil
		}})
	}
	med := runWays(b, ways)
	b.ReportMetric(med["padded-cold"]/med["padded-hot"], "padded-cold/hot")
	b.ReportMetric(med["unpadded-cold"]/med["unpadded-hot"], "unpadded-cold/hot")
	b.ReportMetric(med["padded-cold"]/med["unpadded-cold"], "cold-padded/unpadded")
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
	opts := fsstore.Options{PreallocBytes: fsstore.DefaultPreallocBytes}
	hot, _ := coldStore(b, opts, "s-a.log")
	ahead, aheadLog := coldStore(b, opts, "s-a.log")
	cold, coldLog := coldStore(b, opts, "s-a.log")
	med := runWays(b, []*coldWay{
		{name: "hot", s: hot},
		// Every page past the one holding the log's last byte.
		{name: "ahead-cold", s: ahead, ready: func() error {
			return dropPages(aheadLog, (fsstore.LogSize(ahead, "a")+4095)/4096*4096)
		}},
		{name: "cold", s: cold, ready: func() error { return dropPages(coldLog, 0) }},
	})
	b.ReportMetric(med["ahead-cold"]/med["hot"], "ahead-cold/hot")
	b.ReportMetric(med["cold"]/med["hot"], "cold/hot")
}

// coldWay is one way a cold-page benchmark commits: to a store of its
// own, each time after ready (when set).
type coldWay struct {
	name  string
	s     *fsstore.Store
	ready func() error
	med   *median
}

// coldStore opens a store with opts on a fresh workspace, commits turn 0
// to session "a" (creating its log), and opens the file name in its
// sessions/ for the benchmark to drop pages of.
func coldStore(b *testing.B, opts fsstore.Options, name string) (*fsstore.Store, *os.File) {
	root := b.TempDir()
	s, err := fsstore.Open(root, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.Commit(bg, "a", benchTurn(0), session.CommitOptions{}); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, ".cairn", "sessions", name))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return s, f
}

// runWays commits a turn (benchTurn) to session "a" of each way's store
// in turn, b.N times each, and reports each way's median commit in µs as
// <name>-us; it returns them by name.
func runWays(b *testing.B, ways []*coldWay) map[string]float64 {
	for _, w := range ways {
		w.med = medianOf(b)
	}
	b.ResetTimer()
	for i := range b.N {
		for _, w := range ways {
			if w.ready != nil {
				if err := w.ready(); err != nil {
					b.Fatal(err)
				}
			}
			c := benchTurn(i + 1)
			w.med.start()
			if _, err := w.s.Commit(bg, "a", c, session.CommitOptions{}); err != nil {
				b.Fatal(err)
			}
			w.med.stop()
		}
	}
	b.StopTimer()
	med := map[string]float64{}
	for _, w := range ways {
		med[w.name] = float64(w.med.value().Microseconds())
		b.ReportMetric(med[w.name], w.name+"-us")
	}
	return med
}

// dropPages drops f's clean pages from offset off to its end from the
// page cache (posix_fadvise DONTNEED).
func dropPages(f *os.File, off int64) error {
	const dontNeed = 4 // POSIX_FADV_DONTNEED
	if _, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), 0, dontNeed, 0, 0); e != 0 {
		return e
	}
	return nil
}
