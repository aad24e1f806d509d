// Command wsbench measures the workspace tracker on a generated tree of
// 100,000 files in 5,000 directories: index build time and resident memory,
// the latency from a file write to its change event, and the cost of
// RecordManifest after a small change. In the same run it times Watchman's
// crawl and full query of the same tree, when watchman is installed, and
// prints each figure against its target. It cleans up the tree.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/workspace"
)

// Targets from the workspace tracking issue.
const (
	targetBuildRatio   = 1.5                   // index build / watchman crawl
	targetBytesPerFile = 200.0                 // resident bytes per file
	targetLatency      = 50 * time.Millisecond // median write -> event
	targetManifest     = time.Millisecond      // RecordManifest after a small change
)

func main() {
	files := flag.Int("files", 100000, "files in the tree")
	dirs := flag.Int("dirs", 5000, "directories in the tree")
	runs := flag.Int("runs", 3, "index builds (and watchman crawls) timed; the median is reported")
	events := flag.Int("events", 200, "writes timed for event latency")
	manifests := flag.Int("manifests", 50, "small-change manifests timed")
	dir := flag.String("dir", "", "directory to create the tree in (default: a temp dir)")
	flag.Parse()
	if err := run(*files, *dirs, *runs, *events, *manifests, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "wsbench:", err)
		os.Exit(1)
	}
}

func run(nFiles, nDirs, runs, nEvents, nManifests int, dir string) error {
	base, err := os.MkdirTemp(dir, "wsbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	root := filepath.Join(base, "tree")
	fmt.Printf("wsbench: %d files in %d directories under %s (%s/%s, GOMAXPROCS=%d, %s)\n",
		nFiles, nDirs, root, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version())
	t0 := time.Now()
	paths, err := generate(root, nFiles, nDirs)
	if err != nil {
		return err
	}
	fmt.Printf("generated in %v\n", time.Since(t0).Round(time.Millisecond))
	ctx := context.Background()

	// Index build, and its resident memory.
	var builds []time.Duration
	var rssDelta, heapDelta int64
	for i := range runs {
		rss0, heap0 := memNow()
		start := time.Now()
		tr, err := workspace.Open(root, workspace.Options{})
		if err != nil {
			return err
		}
		builds = append(builds, time.Since(start))
		rss1, heap1 := memNow()
		st := tr.Status()
		if i == 0 {
			rssDelta, heapDelta = rss1-rss0, heap1-heap0
			fmt.Printf("index: %d files, %d dirs, %d watches, mode %s\n", st.Files, st.Dirs, st.Watches, st.Mode)
		}
		if err := tr.Close(); err != nil {
			return err
		}
	}
	build := median(builds)

	tr, err := workspace.Open(root, workspace.Options{})
	if err != nil {
		return err
	}
	defer tr.Close()

	// First manifest: hashes every file.
	start := time.Now()
	if _, err := tr.RecordManifest(ctx); err != nil {
		return err
	}
	firstManifest := time.Since(start)

	// Event latency: write a file, wait for its change event.
	got := make(chan string, 1024)
	cancel := tr.Subscribe(func(path, kind string) {
		select {
		case got <- path:
		default:
		}
	})
	rng := rand.New(rand.NewPCG(1, 2))
	var lats []time.Duration
	for i := range nEvents {
		rel := paths[rng.IntN(len(paths))]
		// Drain stale notifications.
	drain:
		for {
			select {
			case <-got:
			default:
				break drain
			}
		}
		start := time.Now()
		if err := os.WriteFile(filepath.Join(root, rel), fmt.Appendf(nil, "edit %d\n", i), 0o644); err != nil {
			return err
		}
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case p := <-got:
				if p == rel {
					lats = append(lats, time.Since(start))
					break wait
				}
			case <-timeout:
				return fmt.Errorf("no event for %s within 5s", rel)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()

	// RecordManifest after a small change (one file written), and with none.
	var small, none, syncs []time.Duration
	for i := range nManifests {
		rel := paths[rng.IntN(len(paths))]
		if err := os.WriteFile(filepath.Join(root, rel), fmt.Appendf(nil, "manifest edit %d\n", i), 0o644); err != nil {
			return err
		}
		start := time.Now()
		if _, err := tr.RecordManifest(ctx); err != nil {
			return err
		}
		small = append(small, time.Since(start))
		start = time.Now()
		if _, err := tr.RecordManifest(ctx); err != nil {
			return err
		}
		none = append(none, time.Since(start))
		start = time.Now()
		if err := tr.Sync(ctx); err != nil {
			return err
		}
		syncs = append(syncs, time.Since(start))
	}
	// The floor of a durable commit on this disk: one small append plus
	// one fdatasync.
	floor, err := fsyncFloor(base, 50)
	if err != nil {
		return err
	}
	mdir := filepath.Join(root, ".cairn", "manifests")
	mbytes := dirBytes(mdir)
	st := tr.Status()
	if err := tr.Close(); err != nil {
		return err
	}

	shaMBs := hashThroughput()

	// Watchman, same tree, same process run.
	wmCrawl, wmQuery, wmFiles, wmErr := watchman(root, runs)

	fmt.Println()
	fmt.Println("figure                                   cairn            watchman 4.9     target       ratio")
	if wmErr == nil {
		fmt.Printf("index build (median of %d)               %-16v %-16v ≤ 1.5× crawl  %.2f× (%s)\n", runs, build.Round(time.Millisecond), wmCrawl.Round(time.Millisecond), ratio(build, wmCrawl), verdict(ratio(build, wmCrawl) <= targetBuildRatio))
		fmt.Printf("  watchman: watch+first query %v, a later full query %v, %d files\n", wmCrawl.Round(time.Millisecond), wmQuery.Round(time.Millisecond), wmFiles)
	} else {
		fmt.Printf("index build (median of %d)               %-16v n/a (%v)\n", runs, build.Round(time.Millisecond), wmErr)
	}
	bpf := float64(rssDelta) / float64(nFiles)
	fmt.Printf("resident memory (RSS delta)              %-16s %-16s ≤ 200 B/file  %.2f× of target (%s)\n", fmt.Sprintf("%.0f B/file", bpf), "-", bpf/targetBytesPerFile, verdict(bpf <= targetBytesPerFile))
	fmt.Printf("  RSS delta %.1f MiB, live heap delta %.1f MiB (%.0f B/file)\n", float64(rssDelta)/(1<<20), float64(heapDelta)/(1<<20), float64(heapDelta)/float64(nFiles))
	lm := median(lats)
	fmt.Printf("event latency write->event (median)      %-16v %-16s ≤ 50ms        %.3f× of target (%s)\n", lm.Round(time.Microsecond), "-", ratio(lm, targetLatency), verdict(lm <= targetLatency))
	fmt.Printf("  p90 %v, max %v over %d writes\n", pct(lats, 90).Round(time.Microsecond), slices.Max(lats).Round(time.Microsecond), len(lats))
	ms := median(small)
	fmt.Printf("RecordManifest after a 1-file change     %-16v %-16s ≤ 1ms         %.2f× of target (%s)\n", ms.Round(time.Microsecond), "-", ratio(ms, targetManifest), verdict(ms <= targetManifest))
	fmt.Printf("  p90 %v; unchanged tree %v (no write); Sync alone %v; append+fdatasync floor on this disk %v\n",
		pct(small, 90).Round(time.Microsecond), median(none).Round(time.Microsecond), median(syncs).Round(time.Microsecond), floor.Round(time.Microsecond))
	fmt.Printf("first RecordManifest (hashes all %d files) %v\n", nFiles, firstManifest.Round(time.Millisecond))
	fmt.Printf("manifest store after %d manifests: %d bytes\n", 1+2*nManifests, mbytes)
	fmt.Printf("SHA-256 throughput (stdlib, 1 MiB blocks): %.0f MB/s\n", shaMBs)
	fmt.Printf("tracker counters: events=%d rescans=%d overflows=%d\n", st.Events, st.Rescans, st.Overflows)
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "meets"
	}
	return "MISSES"
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// generate writes nFiles files of 100-600 bytes spread evenly over nDirs
// directories two levels deep, and returns their paths.
func generate(root string, nFiles, nDirs int) ([]string, error) {
	rng := rand.New(rand.NewPCG(42, 7))
	top := max(1, nDirs/100)
	var dirs []string
	for i := range nDirs {
		dirs = append(dirs, fmt.Sprintf("pkg%03d/mod%04d", i%top, i))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 600)
	paths := make([]string, 0, nFiles)
	for i := range nFiles {
		rel := fmt.Sprintf("%s/file%06d.go", dirs[i%len(dirs)], i)
		n := 100 + rng.IntN(500)
		for j := range n {
			buf[j] = 'a' + byte(rng.IntN(26))
		}
		if err := os.WriteFile(filepath.Join(root, rel), buf[:n], 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, rel)
	}
	return paths, nil
}

// memNow returns VmRSS and the live heap after a full GC that also returns
// freed memory to the OS.
func memNow() (rss, heap int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			rss = kb << 10
		}
	}
	return rss, int64(ms.HeapAlloc)
}

func fsyncFloor(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "floor-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var d []time.Duration
	rec := make([]byte, 120)
	for range n {
		start := time.Now()
		if _, err := f.Write(rec); err != nil {
			return 0, err
		}
		if err := atomicfile.Fdatasync(f); err != nil {
			return 0, err
		}
		d = append(d, time.Since(start))
	}
	return median(d), nil
}

func dirBytes(dir string) int64 {
	var n int64
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if fi, err := de.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func hashThroughput() float64 {
	buf := make([]byte, 1<<20)
	start := time.Now()
	const n = 256
	for range n {
		sha256.Sum256(buf)
	}
	return float64(n) / time.Since(start).Seconds() * (1 << 20) / 1e6
}

// watchman times `watchman watch ROOT` plus a full query (the crawl), then
// a second full query, runs times, and shuts the server down. Queries go
// as JSON on stdin: Debian's 4.9 rejects them as arguments.
func watchman(root string, runs int) (crawl, query time.Duration, files int, err error) {
	if _, err := exec.LookPath("watchman"); err != nil {
		return 0, 0, 0, fmt.Errorf("watchman not installed")
	}
	defer exec.Command("watchman", "shutdown-server").Run()
	var crawls, queries []time.Duration
	q := fmt.Sprintf(`["query", %q, {"fields": ["name", "size"], "expression": ["type", "f"]}]`, root)
	for range runs {
		exec.Command("watchman", "watch-del", root).Run()
		exec.Command("watchman", "shutdown-server").Run()
		// Start the server outside the timing, as a running daemon would
		// be. Right after shutdown-server the old one may still hold the
		// socket, so retry for a while.
		var out []byte
		for try := 0; ; try++ {
			if out, err = exec.Command("watchman", "get-pid").CombinedOutput(); err == nil {
				break
			}
			if try == 50 {
				return 0, 0, 0, fmt.Errorf("watchman get-pid: %v: %s", err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		start := time.Now()
		if out, err := exec.Command("watchman", "watch", root).CombinedOutput(); err != nil {
			return 0, 0, 0, fmt.Errorf("watchman watch: %v: %s", err, out)
		}
		n, err := wmQuery(q)
		if err != nil {
			return 0, 0, 0, err
		}
		crawls = append(crawls, time.Since(start))
		start = time.Now()
		if _, err := wmQuery(q); err != nil {
			return 0, 0, 0, err
		}
		queries = append(queries, time.Since(start))
		files = n
	}
	exec.Command("watchman", "watch-del", root).Run()
	return median(crawls), median(queries), files, nil
}

func wmQuery(q string) (int, error) {
	cmd := exec.Command("watchman", "-j")
	cmd.Stdin = strings.NewReader(q)
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("watchman query: %v: %s", err, out)
	}
	var res struct {
		Files []json.RawMessage `json:"files"`
		Error string            `json:"error"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("watchman query: %v", err)
	}
	if res.Error != "" {
		return 0, fmt.Errorf("watchman query: %s", res.Error)
	}
	return len(res.Files), nil
}
