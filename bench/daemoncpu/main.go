// Command daemoncpu measures cairnd's own CPU per agent turn: N clients,
// each on a session of its own, make the agent workload's checkpoint (two
// messages of about 2 KB and 6 KB, usage, state) back to back through one
// cairnd, and cairnd's CPU time is read from /proc/<pid>/stat across the
// run. The clients are goroutines of this process (Go, not Python), so the
// figure is cairnd's alone, less noisy than bench/agent's. Several binaries
// are run in turn, round after round (A/B interleaved), on the same disk:
//
//	go run ./bench/daemoncpu -bins /tmp/cairnd-main,build/cairnd -agents 1,32 -turns 3200 -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

func main() {
	bins := flag.String("bins", "build/cairnd", "comma-separated cairnd binaries to compare")
	agents := flag.String("agents", "1,32", "comma-separated client counts")
	total := flag.Int("turns", 3200, "turns per run, split evenly among the clients")
	rounds := flag.Int("rounds", 3, "rounds; each runs every binary at every client count")
	dir := flag.String("dir", "", "parent of the temp workspaces (default: the system's)")
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*agents, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -agents %q", *agents))
		}
		ns = append(ns, n)
	}
	bs := strings.Split(*bins, ",")
	type key struct {
		bin string
		n   int
	}
	res := map[key][]result{}
	for r := 1; r <= *rounds; r++ {
		for _, n := range ns {
			for _, b := range bs {
				x, err := run(b, n, max(1, *total/n), *dir)
				if err != nil {
					fatal(fmt.Errorf("%s x%d: %w", b, n, err))
				}
				res[key{b, n}] = append(res[key{b, n}], x)
				fmt.Printf("round %d  %-28s agents %2d  cairnd %4.0f us/turn  %5.0f turns/s  median %4.0f us  (load %s)\n",
					r, b, n, x.cpuUS, x.rate, x.medianUS, load())
			}
		}
	}
	fmt.Println("# medians over the rounds")
	for _, n := range ns {
		for _, b := range bs {
			xs := res[key{b, n}]
			fmt.Printf("%-28s agents %2d  cairnd %4.0f us/turn  %5.0f turns/s  median %4.0f us\n", b, n,
				med(xs, func(x result) float64 { return x.cpuUS }), med(xs, func(x result) float64 { return x.rate }),
				med(xs, func(x result) float64 { return x.medianUS }))
		}
	}
}

type result struct{ cpuUS, rate, medianUS float64 }

func med(xs []result, f func(result) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// run starts bin on a new workspace, makes n*turns checkpoints through it
// from n clients, and stops it.
func run(bin string, n, turns int, parent string) (result, error) {
	ws, err := os.MkdirTemp(parent, "daemoncpu-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(ws)
	cmd := exec.Command(bin, "--workspace", ws, "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	ctx := context.Background()
	clients := make([]*protocol.Client, n)
	runs := make([]string, n)
	for i := range clients {
		c, err := dial(ctx, ws)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		sid := fmt.Sprintf("agent-%02d", i)
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{session.Value(`{"role":"system","content":"you are an agent"}`)}}}); err != nil {
			return result{}, err
		}
		br, err := c.BeginRun(ctx, api.BeginRunRequest{SessionID: sid})
		if err != nil {
			return result{}, err
		}
		clients[i], runs[i] = c, br.RunID
	}
	lat := make([][]time.Duration, n)
	errs := make([]error, n)
	cpu0, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := 1; t <= turns; t++ {
				req := turn(runs[i], int64(t))
				s := time.Now()
				if _, err := clients[i].Checkpoint(ctx, req); err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], time.Since(s))
			}
		}()
	}
	wg.Wait()
	span := time.Since(t0)
	cpu1, err := procCPU(cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	for _, e := range errs {
		if e != nil {
			return result{}, e
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	total := float64(n * turns)
	return result{
		cpuUS:    (cpu1 - cpu0).Seconds() * 1e6 / total,
		rate:     total / span.Seconds(),
		medianUS: float64(all[len(all)/2].Microseconds()),
	}, nil
}

// turn is the agent workload's checkpoint (bench/bindings/python_turn.py).
func turn(runID string, i int64) api.CheckpointRequest {
	user := fmt.Sprintf(`{"role":"user","content":%q,"turn":%d}`, strings.Repeat("x", 2000), i)
	asst := fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":%q},{"type":"tool_use","id":"t%d","name":"edit","input":{"path":"src/a.go","patch":%q}}]}`,
		strings.Repeat("y", 3000), i, strings.Repeat("z", 3000))
	return api.CheckpointRequest{
		RunID: runID, Turn: i,
		NewMessages:    []session.Value{session.Value(user), session.Value(asst)},
		Usage:          session.Usage{InputTokens: 1000 * i, OutputTokens: 200 * i, TotalTokens: 1200 * i, Cost: 0.001 * float64(i)},
		ToolCallsCount: i,
		State:          session.Value(fmt.Sprintf(`{"step":"after_tool","turn":%d}`, i)),
	}
}

// dial waits up to 10 s for the daemon's socket.
func dial(ctx context.Context, ws string) (*protocol.Client, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var c *protocol.Client
		sock, err := protocol.SocketPath(ws)
		if err == nil {
			c, err = protocol.Dial(ctx, sock, nil)
		}
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procCPU is a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

func load() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "daemoncpu:", err)
	os.Exit(1)
}
