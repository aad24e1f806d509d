package daemon_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestE2EScale: a session of 256 MiB of live data, built through a real
// cairnd by delta saves, is read back in daemon mode by the reads that
// cost what they return: a tail read, one artifact read, a paged export
// to a file and a fork inside the store. Each answers right, and the
// daemon's peak RSS rises by less than 64 MiB while it serves them all,
// where reading the session whole would cost its size several times.
//
// The session is built by one daemon, which is then stopped; a second
// daemon serves the reads, so that its peak RSS (VmHWM, the peak since the
// process started) holds only what opening the store cost before they
// start. It writes about 256 MiB to the store, as much again to the export
// and to the fork, so it is skipped under -short. It is skipped under
// -race too, where the client's encoding of the 256 MiB takes most of a
// minute and the daemon (built without -race) is what is measured; `make
// test` runs it in test-norace, with neither.
func TestE2EScale(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 800 MiB; runs without -short (make test-norace does)")
	}
	if raceEnabled {
		t.Skip("the race detector slows the client's 256 MiB of saves several times and adds nothing to what is measured (the daemon's RSS); make test-norace runs it without -race")
	}
	const (
		saves     = 64
		perSave   = 384     // messages of about 8 KiB in each save
		msgText   = 8 << 10 // bytes of text in each message
		artSize   = 1 << 20 // one artifact per save
		bound     = 64 << 20
		messages  = saves * perSave
		sid, fork = "big", "big-fork"
	)
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Build: 64 saves of 3 MiB of messages and a 1 MiB artifact each.
	start := time.Now()
	p := startCairnd(t, ws)
	c := p.dial(t)
	rng := rand.NewChaCha8([32]byte{13})
	text := strings.Repeat("m", msgText)
	artSums := map[string]string{}
	for s := range saves {
		ms := make([]session.Value, perSave)
		for i := range ms {
			ms[i] = val(`{"n":` + strconv.Itoa(s*perSave+i) + `,"text":"` + text + `"}`)
		}
		data := make([]byte, artSize)
		rng.Read(data)
		id := fmt.Sprintf("a-%d", s)
		sum := sha256.Sum256(data)
		artSums[id] = hex.EncodeToString(sum[:])
		r := must[api.SaveResult](t, "save")(c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{
			AppendMessages:  ms,
			AppendArtifacts: []session.Artifact{{ID: id, Name: id + ".bin", Data: data}},
		}}))
		if r.Generation != uint64(s+1) {
			t.Fatalf("save %d: generation %d", s, r.Generation)
		}
	}
	sum := must[session.Summary](t, "summary")(c.Summary(ctx, sid))
	if sum.MessageCount != messages || sum.ArtifactCount != saves || sum.LiveBytes < 256<<20 {
		t.Fatalf("built session: %+v", sum)
	}
	built := time.Since(start)
	stopCairnd(t, p)

	// Serve: a fresh daemon on the same store. Its peak RSS so far is
	// what opening the store cost; each read's rise over it is recorded.
	start = time.Now()
	p = startCairnd(t, ws)
	opened := time.Since(start)
	c = p.dial(t)
	pid := p.cmd.Process.Pid
	baseRSS := procMemKiB(t, pid, "VmRSS") << 10
	baseHWM := procMemKiB(t, pid, "VmHWM") << 10
	var steps []string
	step := func(name string) {
		steps = append(steps, fmt.Sprintf("%s %+d MiB", name, (procMemKiB(t, pid, "VmHWM")<<10-baseHWM)>>20))
	}

	start = time.Now()
	tail := must[api.MessagesResult](t, "messages tail 10")(c.Messages(ctx, api.MessagesRequest{SessionID: sid, Tail: 10}))
	step("tail")
	if tail.Total != messages || tail.From != messages-10 || len(tail.Messages) != 10 || tail.Generation != saves {
		t.Fatalf("tail: total %d from %d, %d messages, generation %d", tail.Total, tail.From, len(tail.Messages), tail.Generation)
	}
	for i, m := range tail.Messages {
		var got struct {
			N    int    `json:"n"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m, &got); err != nil || got.N != messages-10+i || got.Text != text {
			t.Fatalf("tail message %d: n=%d, %d bytes of text (%v)", i, got.N, len(got.Text), err)
		}
	}

	art := must[api.ArtifactResult](t, "artifact")(c.Artifact(ctx, api.ArtifactRequest{SessionID: sid, ArtifactID: "a-17"}))
	step("artifact")
	gotSum := sha256.Sum256(art.Artifact.Data)
	if hex.EncodeToString(gotSum[:]) != artSums["a-17"] || art.Artifact.SHA256 != artSums["a-17"] || art.Artifact.Size != artSize {
		t.Fatalf("artifact a-17: %d bytes, sha256 %x, recorded %s size %d; want %s", len(art.Artifact.Data), gotSum, art.Artifact.SHA256, art.Artifact.Size, artSums["a-17"])
	}

	out := filepath.Join(t.TempDir(), "big.json")
	exp := must[api.ExportFileResult](t, "exportFile")(c.ExportFile(ctx, sid, out))
	step("exportFile")
	if fi, err := os.Stat(out); err != nil || exp.Generation != saves || exp.Path != out || fi.Size() != exp.Bytes {
		t.Fatalf("exportFile: %+v (%v)", exp, err)
	}

	fr := must[api.ForkResult](t, "fork")(c.Fork(ctx, api.ForkRequest{SessionID: sid, NewID: fork}))
	step("fork")
	fsum := must[session.Summary](t, "fork summary")(c.Summary(ctx, fork))
	if fr.SessionID != fork || fsum.MessageCount != messages || fsum.ArtifactCount != saves || fsum.Generation != fr.Generation {
		t.Fatalf("fork %+v: summary %+v", fr, fsum)
	}
	served := time.Since(start)

	peak := procMemKiB(t, pid, "VmHWM") << 10
	rise := peak - baseHWM
	t.Logf("built %d MiB live (%d messages, %d artifacts) in %v; reopened in %v; tail, artifact, export of %d MiB and fork in %v",
		sum.LiveBytes>>20, messages, saves, built.Round(time.Millisecond), opened.Round(time.Millisecond), exp.Bytes>>20, served.Round(time.Millisecond))
	t.Logf("daemon RSS after open %d MiB (peak %d MiB); peak after the reads %d MiB: a rise of %d MiB (bound %d MiB); peak rise after each: %s",
		baseRSS>>20, baseHWM>>20, peak>>20, rise>>20, bound>>20, strings.Join(steps, ", "))
	if rise >= bound {
		t.Errorf("the daemon's peak RSS rose by %d MiB serving reads of a 256 MiB session, over the bound of %d MiB (after each: %s)",
			rise>>20, bound>>20, strings.Join(steps, ", "))
	}

	// Opening the store again, now holding the fork too (a log written as
	// one commit of the whole session), costs as little.
	stopCairnd(t, p)
	p = startCairnd(t, ws)
	reopenHWM := procMemKiB(t, p.cmd.Process.Pid, "VmHWM") << 10
	t.Logf("peak RSS opening the store with the fork: %d MiB", reopenHWM>>20)
	if reopenHWM >= bound {
		t.Errorf("opening a store of two 256 MiB sessions took the daemon's peak RSS to %d MiB, over %d MiB", reopenHWM>>20, bound>>20)
	}
	if got := must[session.Summary](t, "fork summary after reopening")(p.dial(t).Summary(ctx, fork)); got.MessageCount != messages {
		t.Fatalf("fork after reopening: %+v", got)
	}

	// The export is one JSON envelope holding every message in order and
	// every artifact with its bytes, read as a stream.
	start = time.Now()
	n, arts := countEnvelope(t, out, artSums)
	if n != messages || arts != saves {
		t.Fatalf("export holds %d messages and %d artifacts, want %d and %d", n, arts, messages, saves)
	}
	t.Logf("export checked in %v", time.Since(start).Round(time.Millisecond))
}

// countEnvelope reads the envelope at path token by token, never holding
// more than one message or artifact, and returns how many messages and
// artifacts it holds. It fails the test unless messages carry n = 0, 1, ...
// in order and every artifact's data has the sha256 in sums.
func countEnvelope(t *testing.T, path string, sums map[string]string) (messages, artifacts int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	dec.UseNumber()
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("export %s: %s: %v", path, what, err)
	}
	delim := func(want json.Delim) {
		t.Helper()
		tok, err := dec.Token()
		if err != nil || tok != want {
			fail(fmt.Sprintf("want %v, got %v", want, tok), err)
		}
	}
	key := func() string {
		t.Helper()
		tok, err := dec.Token()
		k, ok := tok.(string)
		if err != nil || !ok {
			fail(fmt.Sprintf("want a key, got %v", tok), err)
		}
		return k
	}
	delim('{')
	for dec.More() {
		switch key() {
		case "session":
			delim('{')
			for dec.More() {
				if key() != "messages" {
					skipJSON(t, dec)
					continue
				}
				delim('[')
				for dec.More() {
					var m struct {
						N int `json:"n"`
					}
					if err := dec.Decode(&m); err != nil || m.N != messages {
						fail(fmt.Sprintf("message %d has n=%d", messages, m.N), err)
					}
					messages++
				}
				delim(']')
			}
			delim('}')
		case "artifacts":
			delim('[')
			for dec.More() {
				var a session.Artifact
				if err := dec.Decode(&a); err != nil {
					fail("artifact", err)
				}
				got := sha256.Sum256(a.Data)
				if want := sums[a.ID]; want == "" || hex.EncodeToString(got[:]) != want {
					fail(fmt.Sprintf("artifact %q: %d bytes with sha256 %x, want %q", a.ID, len(a.Data), got, want), nil)
				}
				artifacts++
			}
			delim(']')
		default:
			skipJSON(t, dec)
		}
	}
	delim('}')
	if _, err := dec.Token(); err != io.EOF {
		fail("data after the envelope", err)
	}
	return messages, artifacts
}

// skipJSON reads one value from dec, token by token.
func skipJSON(t *testing.T, dec *json.Decoder) {
	t.Helper()
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return
		}
	}
}

// stopCairnd stops p with SIGTERM (a graceful shutdown, which closes the
// store) and waits for it to exit cleanly.
func stopCairnd(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("cairnd exited %d after SIGTERM; log:\n%s", code, p.logText())
	}
}

// TestE2EManySessions: cairnd with an open-file limit of 256 serves a
// workspace of 2,000 sessions. It starts; through it every session answers
// summary and a tail read and takes a delta save, from several clients at
// once; no call fails; and the daemon never holds 256 descriptors (it
// keeps a bounded set of session logs open and reopens the others as they
// are used).
func TestE2EManySessions(t *testing.T) {
	const (
		sessions = 2000
		nofile   = 256
		clients  = 4
	)
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The sessions are written in-process, which is faster than through a
	// daemon; the store is closed before cairnd opens it.
	start := time.Now()
	store, err := fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) string { return fmt.Sprintf("s%04d", i) }
	err = parallel(sessions, 8, func(i int) error {
		_, err := store.Commit(ctx, id(i), &session.Change{AppendMessages: []session.Value{
			val(fmt.Sprintf(`{"i":%d,"turn":0}`, i)), val(fmt.Sprintf(`{"i":%d,"turn":1}`, i)),
		}}, session.CommitOptions{})
		return err
	})
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)

	// Count the daemon's descriptors from its start (opening the store
	// reads every log) until the work is done.
	start = time.Now()
	p := spawnCairndLimited(t, ws, nofile)
	pid := p.cmd.Process.Pid
	var maxFDs atomic.Int64
	sample := func() {
		if n := countFDs(pid); int64(n) > maxFDs.Load() {
			maxFDs.Store(int64(n))
		}
	}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	stopSampler := sync.OnceFunc(func() { close(stop); sampler.Wait() })
	t.Cleanup(stopSampler)
	waitReady(t, p)
	opened := time.Since(start)
	if lim := procLimit(t, pid, "Max open files"); lim != fmt.Sprintf("%d %d", nofile, nofile) {
		t.Fatalf("cairnd's open-file limit is %q, want %d (soft and hard)", lim, nofile)
	}

	cs := make([]*protocol.Client, clients)
	for i := range cs {
		cs[i] = p.dial(t)
	}
	start = time.Now()
	err = parallel(sessions, clients, func(i int) error {
		c, sid := cs[i%clients], id(i)
		sum, err := c.Summary(ctx, sid)
		if err != nil {
			return fmt.Errorf("summary of %s: %w", sid, err)
		}
		if sum.MessageCount != 2 || sum.Generation != 1 {
			return fmt.Errorf("summary of %s: %+v", sid, sum)
		}
		tail, err := c.Messages(ctx, api.MessagesRequest{SessionID: sid, Tail: 1})
		if err != nil {
			return fmt.Errorf("messages tail 1 of %s: %w", sid, err)
		}
		if want := fmt.Sprintf(`{"i":%d,"turn":1}`, i); len(tail.Messages) != 1 || string(tail.Messages[0]) != want || tail.From != 1 {
			return fmt.Errorf("messages tail 1 of %s: from %d %q, want %s", sid, tail.From, tail.Messages, want)
		}
		r, err := c.Save(ctx, api.SaveRequest{SessionID: sid, ExpectGeneration: session.Expect(1), Change: &session.Change{
			AppendMessages: []session.Value{val(fmt.Sprintf(`{"i":%d,"turn":2}`, i))},
		}})
		if err != nil {
			return fmt.Errorf("save to %s: %w", sid, err)
		}
		if r.Generation != 2 {
			return fmt.Errorf("save to %s: generation %d", sid, r.Generation)
		}
		return nil
	})
	served := time.Since(start)
	if err != nil {
		t.Fatalf("%v (code %s); log tail:\n%s", err, protocol.CodeOf(err), lastLines(p.logText(), 20))
	}

	// Every save is there: the list holds every session at generation 2.
	list, err := cs[0].List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gen2 := 0
	for _, s := range list {
		if s.Generation == 2 && s.MessageCount == 3 {
			gen2++
		}
	}
	if len(list) != sessions || gen2 != sessions {
		t.Fatalf("list: %d sessions, %d of them with the save; want %d", len(list), gen2, sessions)
	}
	stopSampler()
	// An internal error answered to a client is logged at ERROR; the
	// workspace tracker only warns when it runs out of descriptors.
	if log := p.logText(); strings.Contains(log, "[ERROR]") || strings.Contains(log, "too many open files") {
		t.Fatalf("the daemon logged an error or ran out of descriptors:\n%s", lastLines(log, 20))
	}
	t.Logf("%d sessions created in %v; cairnd (open-file limit %d) ready in %v; %d summaries, tail reads and saves from %d clients in %v; at most %d descriptors open",
		sessions, created.Round(time.Millisecond), nofile, opened.Round(time.Millisecond), sessions, clients, served.Round(time.Millisecond), maxFDs.Load())
	if maxFDs.Load() >= nofile {
		t.Fatalf("cairnd held %d descriptors, not under its limit of %d", maxFDs.Load(), nofile)
	}
}

// spawnCairndLimited starts cairnd on ws with an open-file limit of
// nofile, soft and hard, without waiting for it. A shell sets the limit and
// execs cairnd, so the process (and its pid) is cairnd's.
func spawnCairndLimited(t *testing.T, ws string, nofile int) *proc {
	t.Helper()
	script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)
	return spawnCommand(t, ws, "/bin/sh", "-c", script, bins.cairnd, "--workspace", ws, "--log-level", "debug")
}

// procLimit returns the soft and hard values of a row of /proc/<pid>/limits.
func procLimit(t *testing.T, pid int, row string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, row); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + " " + f[1]
			}
		}
	}
	t.Fatalf("no %q in /proc/%d/limits", row, pid)
	return ""
}

// countFDs counts the entries of /proc/<pid>/fd (0 once the process is
// gone).
func countFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// parallel calls f(0..n-1) from workers goroutines and returns the first
// error; after one, the rest are not called.
func parallel(n, workers int, f func(i int) error) error {
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					first = errors.Join(first, err)
					mu.Unlock()
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
