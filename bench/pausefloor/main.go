//go:build linux

// Command pausefloor measures what a pause costs the next durable write:
// an 8 KiB pwrite into zeros written and synced beforehand, then an
// fdatasync, after the caller has waited a given gap, for each gap in
// turn. An agent commits a turn every few seconds, not back to back, and
// every store's commit pays whatever the machine's idle costs, so this is
// the floor of a turn at an agent's pace. The gap is slept (the vCPU may
// idle) or, with -spin, spent in a busy loop (the CPU stays awake, only
// the disk idles), so the two halves of the cost can be told apart.
//
//	go run ./bench/pausefloor -gaps 0,1ms,10ms,30ms,50ms,100ms,1s -n 30
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/internal/vfs"
)

const (
	recordSize = 8192
	fileSize   = 8 << 20
)

func main() {
	dir := flag.String("dir", os.TempDir(), "parent of the scratch directory")
	gaps := flag.String("gaps", "0,1ms,10ms,30ms,50ms,100ms,1s", "comma-separated pauses before each write")
	n := flag.Int("n", 30, "writes per gap")
	spin := flag.Bool("spin", false, "spend each gap in a busy loop instead of sleeping")
	flag.Parse()
	d, err := os.MkdirTemp(*dir, "pausefloor-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(d)
	f, err := zeros(filepath.Join(d, "floor.bin"))
	if err != nil {
		fail(err)
	}
	defer f.Close()
	how := "slept"
	if *spin {
		how = "spun"
	}
	fmt.Printf("# %d writes of %d bytes per gap, the gap %s\n", *n, recordSize, how)
	fmt.Printf("%8s %12s %16s %14s\n", "gap", "pwrite us", "fdatasync us", "total us")
	rec := make([]byte, recordSize)
	for i := range rec {
		rec[i] = 0x5a
	}
	var off int64
	for _, s := range strings.Split(*gaps, ",") {
		gap, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || gap < 0 {
			fail(fmt.Errorf("bad gap %q", s))
		}
		var w, sy, tot []float64
		for range *n {
			wait(gap, *spin)
			t0 := time.Now()
			if _, err := f.WriteAt(rec, off); err != nil {
				fail(err)
			}
			t1 := time.Now()
			if err := vfs.Fdatasync(f); err != nil {
				fail(err)
			}
			t2 := time.Now()
			w, sy, tot = append(w, us(t1.Sub(t0))), append(sy, us(t2.Sub(t1))), append(tot, us(t2.Sub(t0)))
			off = (off + recordSize) % fileSize
		}
		fmt.Printf("%8s %12.0f %16.0f %14.0f\n", gap, median(w), median(sy), median(tot))
	}
}

// zeros creates path holding fileSize zero bytes, written and synced, so
// that every write the benchmark makes overwrites allocated blocks.
func zeros(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(make([]byte, fileSize)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func wait(gap time.Duration, spin bool) {
	if gap == 0 {
		return
	}
	if !spin {
		time.Sleep(gap)
		return
	}
	for end := time.Now().Add(gap); time.Now().Before(end); {
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pausefloor:", err)
	os.Exit(1)
}
