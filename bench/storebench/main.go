// Command storebench measures the file store's commit cost against a
// full-rewrite baseline and the physical floor (one append plus one
// fdatasync), and its load time against encoding/json, all in one process
// on the same disk. `make bench` runs it; docs/PERFORMANCE.md records what
// it printed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/session"
)

func main() {
	n := flag.Int("messages", 10000, "messages in the session, one per commit")
	window := flag.Int("window", 1000, "the last commits measured against the floor")
	rewrites := flag.Int("rewrites", 15, "full-rewrite baseline samples at the end")
	loads := flag.Int("loads", 5, "load samples")
	dir := flag.String("dir", "", "directory to run in (default: a temp dir on the same disk as /tmp)")
	flag.Parse()
	if err := run(*n, *window, *rewrites, *loads, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "storebench:", err)
		os.Exit(1)
	}
}

// messages returns n JSON messages whose sizes are mixed from 200 B to
// 200 KB: 70% up to 1 KB, 25% up to 10 KB, 4% up to 50 KB, 1% up to 200 KB.
func messages(n int) []session.Value {
	rng := rand.New(rand.NewPCG(42, 7))
	out := make([]session.Value, n)
	for i := range out {
		var lo, hi int
		switch p := rng.IntN(100); {
		case p < 70:
			lo, hi = 200, 1000
		case p < 95:
			lo, hi = 1000, 10000
		case p < 99:
			lo, hi = 10000, 50000
		default:
			lo, hi = 50000, 200000
		}
		size := lo + rng.IntN(hi-lo)
		b := make([]byte, 0, size)
		b = fmt.Appendf(b, `{"role":"assistant","turn":%d,"content":"`, i)
		for len(b) < size-2 {
			b = append(b, 'a'+byte(rng.IntN(26)))
		}
		out[i] = append(b, `"}`...)
	}
	return out
}

type stats struct{ median, p99 time.Duration }

func summarize(d []time.Duration) stats {
	s := slices.Clone(d)
	slices.Sort(s)
	return stats{median: s[len(s)/2], p99: s[min(len(s)-1, len(s)*99/100)]}
}

func run(n, window, rewrites, loads int, dir string) error {
	ctx := context.Background()
	root, err := os.MkdirTemp(dir, "storebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	msgs := messages(n)
	total := 0
	for _, m := range msgs {
		total += len(m)
	}
	fmt.Printf("session: %d messages, %.1f MB, one message per commit\n", n, float64(total)/1e6)

	store, err := fsstore.Open(root, fsstore.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	floorFile, err := os.OpenFile(filepath.Join(root, "floor.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer floorFile.Close()

	var cairnLat, floorLat []time.Duration
	var written, delta int64
	for i, m := range msgs {
		start := time.Now()
		res, err := store.Commit(ctx, "bench", &session.Change{AppendMessages: []session.Value{m}}, session.CommitOptions{})
		el := time.Since(start)
		if err != nil {
			return err
		}
		if i < n-window {
			continue
		}
		cairnLat = append(cairnLat, el)
		written += res.BytesWritten
		delta += int64(len(m))
		// The floor, interleaved so both see the same disk conditions:
		// append the same delta bytes and fdatasync once.
		start = time.Now()
		if _, err := floorFile.Write(m); err != nil {
			return err
		}
		if err := atomicfile.Fdatasync(floorFile); err != nil {
			return err
		}
		floorLat = append(floorLat, time.Since(start))
	}
	c, f := summarize(cairnLat), summarize(floorLat)
	overhead := float64(written-delta) / float64(window)
	fmt.Printf("\ncommit at %d messages (last %d commits):\n", n, window)
	fmt.Printf("  cairn         median %8.3f ms  p99 %8.3f ms  bytes/commit %.0f (delta %.0f + %.0f overhead)\n",
		ms(c.median), ms(c.p99), float64(written)/float64(window), float64(delta)/float64(window), overhead)
	fmt.Printf("  floor         median %8.3f ms  p99 %8.3f ms  (append of the delta + one fdatasync)\n", ms(f.median), ms(f.p99))

	st, err := store.Load(ctx, "bench", 0)
	if err != nil {
		return err
	}
	var rewriteLat []time.Duration
	var rewriteBytes int
	for i := 0; i < rewrites; i++ {
		start := time.Now()
		nb, err := rewriteWhole(filepath.Join(root, "whole.json"), st.Snapshot)
		if err != nil {
			return err
		}
		rewriteLat = append(rewriteLat, time.Since(start))
		rewriteBytes = nb
	}
	r := summarize(rewriteLat)
	fmt.Printf("  full rewrite  median %8.3f ms  p99 %8.3f ms  bytes/commit %d (whole session as JSON, temp+fsync+rename, %d samples)\n",
		ms(r.median), ms(r.p99), rewriteBytes, rewrites)

	envelope, err := json.Marshal(st.Snapshot)
	if err != nil {
		return err
	}
	var loadLat, jsonLat []time.Duration
	for i := 0; i < loads; i++ {
		start := time.Now()
		got, err := store.Load(ctx, "bench", 0)
		if err != nil {
			return err
		}
		loadLat = append(loadLat, time.Since(start))
		if len(got.Snapshot.Messages) != n {
			return fmt.Errorf("loaded %d messages", len(got.Snapshot.Messages))
		}
		start = time.Now()
		var snap session.Snapshot
		if err := json.Unmarshal(envelope, &snap); err != nil {
			return err
		}
		jsonLat = append(jsonLat, time.Since(start))
	}
	l, j := summarize(loadLat), summarize(jsonLat)
	fmt.Printf("\nload of the whole session (%d samples):\n", loads)
	fmt.Printf("  cairn Load           median %8.1f ms\n", ms(l.median))
	fmt.Printf("  encoding/json decode median %8.1f ms  (same content as one %.1f MB envelope, already in memory)\n", ms(j.median), float64(len(envelope))/1e6)

	fmt.Printf("\nratios (targets in brackets):\n")
	fmt.Printf("  cairn median / floor median          %6.2fx  [<= 2x]\n", float64(c.median)/float64(f.median))
	fmt.Printf("  full rewrite median / cairn median   %6.0fx  [>= 50x]\n", float64(r.median)/float64(c.median))
	fmt.Printf("  bytes/commit - delta                 %6.0f B  [<= 8192 B]\n", overhead)
	fmt.Printf("  json decode / cairn load             %6.2fx  [>= 2x]\n", float64(j.median)/float64(l.median))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rewriteWhole is the baseline store: the whole session as one JSON file,
// written to a temp file, fsync'd and renamed over the old one.
func rewriteWhole(path string, s *session.Snapshot) (int, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return 0, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return len(b), os.Rename(tmp, path)
}
