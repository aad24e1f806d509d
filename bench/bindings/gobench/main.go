// Command gobench is the baseline of the binding benchmarks: the same no-op
// status call and 1 KB delta save, from Go, in embedded mode (the engine in
// process) and daemon mode (the Go protocol client over the socket). It
// prints one JSON line per figure, like the Python, Node.js and Rust
// benchmarks, for bench/bindings/run.sh to compare.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

type figure struct {
	Lang     string  `json:"lang"`
	Mode     string  `json:"mode"`
	Op       string  `json:"op"`
	MedianUS float64 `json:"median_us"`
	P99US    float64 `json:"p99_us"`
}

func measure(n int, f func() error) (float64, float64, error) {
	for i := 0; i < n/10; i++ {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		if err := f(); err != nil {
			return 0, 0, err
		}
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return us(lat[n/2]), us(lat[n*99/100]), nil
}

func main() {
	daemon := flag.String("daemon", "build/cairnd", "the cairnd executable")
	n := flag.Int("n", 5000, "samples per figure")
	flag.Parse()
	abs, err := filepath.Abs(*daemon)
	if err == nil {
		err = run(abs, *n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
}

func message() session.Value {
	return session.Value(`{"role":"assistant","content":"` + strings.Repeat("x", 1000) + `"}`)
}

func emit(mode, op string, med, p99 float64) {
	b, _ := json.Marshal(figure{"go", mode, op, med, p99})
	fmt.Println(string(b))
}

func run(daemon string, n int) error {
	ctx := context.Background()
	msg := message()

	ws, err := os.MkdirTemp("", "gobench-embedded-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	st, err := fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		return err
	}
	// Like libcairn's embedded mode, which the other languages measure: the
	// engine records a workspace manifest with every commit.
	tr, err := workspace.Open(ws, workspace.Options{})
	if err != nil {
		return err
	}
	defer tr.Close()
	eng := engine.New(st, engine.Options{Workspace: tr, Root: ws})
	med, p99, err := measure(n, func() error { _ = eng.Capabilities(); return nil })
	if err != nil {
		return err
	}
	emit("embedded", "status", med, p99)
	med, p99, err = measure(n, func() error {
		_, err := eng.Save(ctx, api.SaveRequest{SessionID: "bench", Change: &session.Change{AppendMessages: []session.Value{msg}}})
		return err
	})
	if err != nil {
		return err
	}
	emit("embedded", "save_1kb", med, p99)
	eng.Close()

	dws, err := os.MkdirTemp("", "gobench-daemon-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dws)
	c, err := protocol.Connect(ctx, dws, &protocol.Options{DaemonPath: daemon, DaemonArgs: []string{"--idle-timeout=30s"}})
	if err != nil {
		return err
	}
	defer func() {
		if s, err := c.Status(ctx); err == nil {
			c.Close()
			_ = syscall.Kill(s.PID, syscall.SIGTERM)
		}
	}()
	med, p99, err = measure(n, func() error { _, err := c.Status(ctx); return err })
	if err != nil {
		return err
	}
	emit("daemon", "status", med, p99)
	med, p99, err = measure(n, func() error {
		_, err := c.Save(ctx, api.SaveRequest{SessionID: "bench", Change: &session.Change{AppendMessages: []session.Value{msg}}})
		return err
	})
	if err != nil {
		return err
	}
	emit("daemon", "save_1kb", med, p99)
	return nil
}
