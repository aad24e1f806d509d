//go:build linux

// Command fsyncfloor measures the disk's floor for N agents committing in
// parallel, each to a file of its own, as cairnd's sessions do: N writers,
// each appending (or overwriting zero-filled, preallocated space with)
// 8 KiB records and calling fdatasync after each, and, for comparison,
// the same N writers sharing one file whose flushes are shared (a group
// commit: one fdatasync acknowledges every record written before it).
// It prints records per second in all, and how many fdatasyncs were in
// flight at once on average.
//
//	go run ./bench/fsyncfloor -dir /tmp -n 1,8,32 -records 200
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const recordSize = 8192

func main() {
	dir := flag.String("dir", os.TempDir(), "parent of the scratch directory")
	ns := flag.String("n", "1,8,32", "comma-separated writer counts")
	records := flag.Int("records", 200, "records per writer")
	flag.Parse()
	d, err := os.MkdirTemp(*dir, "fsyncfloor-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(d)
	fmt.Printf("%-8s %8s %12s %14s\n", "mode", "writers", "records/s", "syncs in flight")
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fail(fmt.Errorf("bad writer count %q", s))
		}
		for _, mode := range []string{"append", "prealloc", "shared"} {
			rate, inflight := run(filepath.Join(d, fmt.Sprintf("%s-%d", mode, n)), mode, n, *records)
			fmt.Printf("%-8s %8d %12.0f %14.1f\n", mode, n, rate, inflight)
		}
	}
}

// run returns records per second and the mean number of fdatasyncs in
// flight, sampled at each fdatasync's start.
func run(dir, mode string, n, records int) (float64, float64) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	files := make([]*os.File, n)
	for i := range files {
		if mode == "shared" && i > 0 {
			files[i] = files[0]
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			fail(err)
		}
		if mode == "prealloc" {
			zero := make([]byte, recordSize*records)
			if _, err := f.WriteAt(zero, 0); err != nil {
				fail(err)
			}
			if err := f.Sync(); err != nil {
				fail(err)
			}
		}
		files[i] = f
	}
	defer func() {
		for i, f := range files {
			if mode != "shared" || i == 0 {
				f.Close()
			}
		}
	}()
	var inFlight, samples, sum atomic.Int64
	block := make([]byte, recordSize)
	for i := range block {
		block[i] = 0x5a
	}
	// shared: one flusher; a writer's record is durable once a flush that
	// started after its write ends (group commit).
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var written, flushed, off int64
	flushing := false
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			f := files[w]
			for r := 0; r < records; r++ {
				if mode == "shared" {
					mu.Lock()
					at := off
					off += recordSize
					mu.Unlock()
					if _, err := f.WriteAt(block, at); err != nil {
						fail(err)
					}
					mu.Lock()
					written++
					mine := written
					for flushed < mine {
						if flushing {
							cond.Wait()
							continue
						}
						flushing = true
						target := written
						mu.Unlock()
						samples.Add(1)
						sum.Add(inFlight.Add(1))
						if err := syscall.Fdatasync(int(f.Fd())); err != nil {
							fail(err)
						}
						inFlight.Add(-1)
						mu.Lock()
						flushing = false
						flushed = max(flushed, target)
						cond.Broadcast()
					}
					mu.Unlock()
					continue
				}
				var err error
				if mode == "prealloc" {
					_, err = f.WriteAt(block, int64(r)*recordSize)
				} else {
					_, err = f.Write(block)
				}
				if err != nil {
					fail(err)
				}
				samples.Add(1)
				sum.Add(inFlight.Add(1))
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					fail(err)
				}
				inFlight.Add(-1)
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	return float64(n*records) / el, float64(sum.Load()) / float64(max(samples.Load(), 1))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fsyncfloor:", err)
	os.Exit(1)
}
