package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
	wstrack "github.com/cairn-dev/cairn/workspace"
)

// benchCommit is the commit every commit benchmark makes: one ~100-byte
// message appended to the client's own session.
func benchCommit(sid string, i int) api.SaveRequest {
	return api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{
		session.Value(fmt.Sprintf(`{"role":"assistant","content":"message number %08d of the benchmark, padded to about 100 bytes"}`, i)),
	}}}
}

// BenchmarkStatusRoundTrip measures one status call over the socket of a
// real cairnd, calls back to back: median and p99 latency.
func BenchmarkStatusRoundTrip(b *testing.B) { benchStatus(b, 0) }

// BenchmarkStatusRoundTripSpaced is BenchmarkStatusRoundTrip with the
// client asleep for a millisecond before each call, as an agent between
// two steps: both processes, and their CPUs, are idle when the call starts.
func BenchmarkStatusRoundTripSpaced(b *testing.B) { benchStatus(b, time.Millisecond) }

func benchStatus(b *testing.B, gap time.Duration) {
	p := startCairnd(b, workspace(b), "--log-level", "warn")
	benchStatusCalls(b, p.dial(b), gap)
}

func benchStatusCalls(b *testing.B, c *protocol.Client, gap time.Duration) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		if gap > 0 {
			time.Sleep(gap)
		}
		t0 := time.Now()
		if _, err := c.Status(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkCommit compares the same durable commit made through the
// embedded engine (over fsstore, in process) and through a real cairnd
// over the socket, with 1 and 32 concurrent clients on distinct sessions.
// The plain pair runs without workspace tracking on either side, so it
// measures the socket alone; the "+files" pair runs both with the workspace
// tracker recording a manifest per commit, as cairnd does by default.
// b.N is the total number of commits; commits/s is reported.
func BenchmarkCommit(b *testing.B) {
	for _, files := range []bool{false, true} {
		suffix := ""
		if files {
			suffix = "+files"
		}
		for _, clients := range []int{1, 32} {
			b.Run(fmt.Sprintf("embedded%s/clients=%d", suffix, clients), func(b *testing.B) {
				ws := workspace(b)
				st, err := fsstore.Open(ws, fsstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				opts := engine.Options{}
				if files {
					tr, err := wstrack.Open(ws, wstrack.Options{})
					if err != nil {
						b.Fatal(err)
					}
					defer tr.Close()
					opts.Workspace = tr
				}
				eng := engine.New(st, opts)
				defer eng.Close()
				runCommits(b, clients, func(int) func(context.Context, api.SaveRequest) error {
					return func(ctx context.Context, r api.SaveRequest) error { _, err := eng.Save(ctx, r); return err }
				})
			})
			b.Run(fmt.Sprintf("socket%s/clients=%d", suffix, clients), func(b *testing.B) {
				args := []string{"--log-level", "warn"}
				if !files {
					args = append(args, "--no-track-files")
				}
				p := startCairnd(b, workspace(b), args...)
				conns := make([]*protocol.Client, clients)
				for i := range conns {
					conns[i] = p.dial(b)
				}
				runCommits(b, clients, func(i int) func(context.Context, api.SaveRequest) error {
					return func(ctx context.Context, r api.SaveRequest) error { _, err := conns[i].Save(ctx, r); return err }
				})
			})
		}
	}
}

// BenchmarkCommitOverhead measures the socket's cost per commit as a ratio:
// each iteration makes one commit through an embedded engine (over fsstore,
// in process) and one through a real cairnd over the socket, in alternating
// order, on the same file system and without workspace tracking. Pairing
// the two cancels most of the disk's drift over the run. Reported: the
// median latency of each and the socket's overhead over the embedded
// median, in percent.
func BenchmarkCommitOverhead(b *testing.B) {
	st, err := fsstore.Open(workspace(b), fsstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(st, engine.Options{})
	defer eng.Close()
	c := startCairnd(b, workspace(b), "--log-level", "warn", "--no-track-files").dial(b)
	ctx := context.Background()
	embedded := func(i int) error { _, err := eng.Save(ctx, benchCommit("bench", i)); return err }
	socket := func(i int) error { _, err := c.Save(ctx, benchCommit("bench", i)); return err }
	alternate(b, "embedded-µs", embedded, "socket-µs", socket)
}

// alternate runs base and other once per iteration, in alternating order
// so that both see the same drift of the machine, then reports the median
// latency of each and other's overhead over base in percent.
func alternate(b *testing.B, baseName string, base func(i int) error, otherName string, other func(i int) error) {
	fns := [2]func(int) error{base, other}
	var lat [2][]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			which := (i + k) % 2
			t0 := time.Now()
			err := fns[which](i)
			lat[which] = append(lat[which], time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	med := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }
	e, s := med(lat[0]), med(lat[1])
	b.ReportMetric(float64(e.Microseconds()), baseName)
	b.ReportMetric(float64(s.Microseconds()), otherName)
	b.ReportMetric(100*(float64(s)/float64(e)-1), "overhead-%")
}

// runCommits makes b.N commits split over clients goroutines, each with its
// own session and its own save function, and reports commits/s.
func runCommits(b *testing.B, clients int, saver func(i int) func(context.Context, api.SaveRequest) error) {
	ctx := context.Background()
	per := (b.N + clients - 1) / clients
	var wg sync.WaitGroup
	b.ResetTimer()
	t0 := time.Now()
	for i := range clients {
		save := saver(i)
		wg.Go(func() {
			sid := fmt.Sprintf("bench-%02d", i)
			for j := range per {
				if err := save(ctx, benchCommit(sid, j)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(per*clients)/elapsed.Seconds(), "commits/s")
}

// echoServer echoes one connection on a Unix socket: the peer process of
// BenchmarkUnixSocketFloor and BenchmarkCommitFloor. With a log path, it
// first appends each message to that file and fdatasyncs it.
func echoServer(sock, log string) int {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ln.Close()
	c, err := ln.Accept()
	if err != nil {
		return 1
	}
	var app *appender
	if log != "" {
		if app, err = openAppender(log); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer app.Close()
	}
	buf := make([]byte, 256)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return 0
		}
		if app != nil {
			if err := app.append(buf[:n]); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return 0
		}
	}
}

// BenchmarkUnixSocketFloor is the floor under BenchmarkStatusRoundTrip: a
// 16-byte ping-pong over a Unix socket between this process and a second
// Go process, with no protocol at all. Median and p99 are reported.
func BenchmarkUnixSocketFloor(b *testing.B) {
	c := startEcho(b, "")
	buf := make([]byte, 16)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// startEcho starts echoServer in a child process and connects to it; with
// a log path the child appends and fdatasyncs each message to it first.
func startEcho(b *testing.B, log string) net.Conn {
	b.Helper()
	sock := filepath.Join(b.TempDir(), "echo.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CAIRN_ECHO_SOCKET="+sock, "CAIRN_ECHO_LOG="+log)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("unix", sock)
		if err == nil {
			b.Cleanup(func() { c.Close() })
			return c
		}
		if i == 200 {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// appender appends records to a file and makes each one durable with
// fdatasync, as the store's session log does, with nothing else around it.
type appender struct {
	f   *os.File
	off int64
}

func openAppender(path string) (*appender, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &appender{f: f}, nil
}

func (a *appender) append(p []byte) error {
	n, err := a.f.WriteAt(p, a.off)
	a.off += int64(n)
	if err != nil {
		return err
	}
	return atomicfile.Fdatasync(a.f)
}

func (a *appender) Close() error { return a.f.Close() }

// BenchmarkCommitFloor is the floor under BenchmarkCommitOverhead: the
// cheapest durable append there is (WriteAt and fdatasync of a 165-byte
// record), made in this process and made by a second Go process over a
// Unix socket with no protocol at all, in alternating order. Reported: the
// median of each and the second's overhead in percent. No design that
// answers after the daemon's fdatasync can beat this overhead on the
// machine that runs it.
func BenchmarkCommitFloor(b *testing.B) {
	dir := b.TempDir()
	local, err := openAppender(filepath.Join(dir, "local.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	c := startEcho(b, filepath.Join(dir, "remote.log"))
	rec := make([]byte, 165)
	buf := make([]byte, len(rec))
	inProcess := func(int) error { return local.append(rec) }
	overSocket := func(int) error {
		if _, err := c.Write(rec); err != nil {
			return err
		}
		_, err := io.ReadFull(c, buf)
		return err
	}
	alternate(b, "in-process-µs", inProcess, "socket-µs", overSocket)
}
