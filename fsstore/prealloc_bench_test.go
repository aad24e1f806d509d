package fsstore_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/session"
)

// BenchmarkCommit8K commits a delta of about 8 KB (a 2 KB and a 6 KB
// message, an agent's turn) to one session, with and without zeros
// written ahead of its log, beside the floors: an 8 KiB append and
// fdatasync to a plain file in the same directory, and an 8 KiB overwrite
// of zeros already written and synced, and fdatasync. Compare the figures
// of one run only: the disk is shared.
func BenchmarkCommit8K(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 8192)
		b.SetBytes(8192)
		b.ResetTimer()
		med := medianOf(b)
		for i := range b.N {
			med.start()
			if _, err := f.WriteAt(buf, int64(i)*8192); err != nil {
				b.Fatal(err)
			}
			if err := vfs.Fdatasync(f); err != nil {
				b.Fatal(err)
			}
			med.stop()
		}
		med.report()
	})
	b.Run("floor-overwrite", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, int64(b.N)*8192), 0); err != nil {
			b.Fatal(err)
		}
		if err := vfs.Fdatasync(f); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 8192)
		for i := range buf {
			buf[i] = byte(i)
		}
		b.SetBytes(8192)
		b.ResetTimer()
		med := medianOf(b)
		for i := range b.N {
			med.start()
			if _, err := f.WriteAt(buf, int64(i)*8192); err != nil {
				b.Fatal(err)
			}
			if err := vfs.Fdatasync(f); err != nil {
				b.Fatal(err)
			}
			med.stop()
		}
		med.report()
	})
	for _, c := range []struct {
		name   string
		budget int64
	}{{"append", 0}, {"prealloc", fsstore.DefaultPreallocBytes}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := fsstore.Open(b.TempDir(), fsstore.Options{PreallocBytes: c.budget})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Commit(bg, "k", benchTurn(0), session.CommitOptions{}); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(8192)
			b.ResetTimer()
			med := medianOf(b)
			for i := range b.N {
				med.start()
				if _, err := s.Commit(bg, "k", benchTurn(i+1), session.CommitOptions{}); err != nil {
					b.Fatal(err)
				}
				med.stop()
			}
			med.report()
		})
	}
}

// benchTurn is an agent turn's delta: a 2 KB and a 6 KB message.
func benchTurn(i int) *session.Change {
	return &session.Change{AppendMessages: []session.Value{
		session.Value(`{"role":"user","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("u", 2000) + `"}`),
		session.Value(`{"role":"assistant","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("a", 6000) + `"}`),
	}}
}

// median collects the time of each operation of a benchmark and reports
// their median beside the mean: on a shared disk a few slow flushes move
// the mean far more than the median.
type median struct {
	b   *testing.B
	t0  time.Time
	all []time.Duration
}

func medianOf(b *testing.B) *median { return &median{b: b, all: make([]time.Duration, 0, b.N)} }

func (m *median) start() { m.t0 = time.Now() }

func (m *median) stop() { m.all = append(m.all, time.Since(m.t0)) }

func (m *median) report() { m.b.ReportMetric(float64(m.value().Nanoseconds()), "median-ns/op") }

// value is the median of the times collected.
func (m *median) value() time.Duration {
	slices.Sort(m.all)
	return m.all[len(m.all)/2]
}
