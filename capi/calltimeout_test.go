//go:build cgo

package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// returnsWithin runs f and fails the test (naming what) when it has not returned
// within limit (a call that would wait for ever); it returns f's results
// and how long f took.
func returnsWithin[T any](t *testing.T, limit time.Duration, what string, f func() (T, error)) (T, time.Duration, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, time.Since(start), r.err
	case <-time.After(limit):
		t.Fatalf("%s still waiting after %v", what, limit)
		var zero T
		return zero, 0, nil
	}
}

// callWithin runs call(h, method, req) within limit (see returnsWithin).
func callWithin(t *testing.T, limit time.Duration, h uint64, method, req string) ([]byte, time.Duration, error) {
	t.Helper()
	return returnsWithin(t, limit, method, func() ([]byte, error) { return call(h, method, []byte(req)) })
}

// TestCallTimeoutStoppedDaemon: with call_timeout_ms, a call to a daemon
// that does not answer (stopped with SIGSTOP) fails with unavailable once
// the bound passes, saying the outcome is unknown; so does a save whose
// request the stopped daemon cannot take in (its write is cut, and the
// connection closed), and so does the next call, whose dial the stopped
// daemon does not answer. Once the daemon runs again the handle reconnects,
// and the save whose write was cut is not in the session: the daemon
// dropped its partial frame.
func TestCallTimeoutStoppedDaemon(t *testing.T) {
	h, pid := daemonHandleWith(t, `"call_timeout_ms":400`)
	if _, err := call(h, "save", []byte(`{"session_id":"s","change":{"append_messages":[{"role":"user","content":"one"}]}}`)); err != nil {
		t.Fatal(err)
	}
	resume := testkit.Stop(t, pid)

	_, took, err := callWithin(t, 10*time.Second, h, "summary", `{"session_id":"s"}`)
	if codeOf(err) != "unavailable" || !strings.Contains(messageOf(err), "no answer to summary from cairnd within 400ms") {
		t.Fatalf("summary on a stopped daemon: %v (code %s), want unavailable, no answer within 400ms", err, codeOf(err))
	}
	if took < 400*time.Millisecond {
		t.Fatalf("summary gave up after %v, before its 400ms", took)
	}

	// 16 MiB cannot sit in the socket's buffers: the write itself blocks.
	big := fmt.Sprintf(`{"session_id":"s","change":{"append_messages":[{"role":"user","content":"big %s"}]}}`, strings.Repeat("x", 16<<20))
	_, _, err = callWithin(t, 10*time.Second, h, "save", big)
	if codeOf(err) != "unavailable" || !strings.Contains(messageOf(err), "no answer to save from cairnd within 400ms") {
		t.Fatalf("a 16 MiB save on a stopped daemon: %v (code %s), want unavailable, no answer within 400ms", err, codeOf(err))
	}

	// The cut write closed the connection: the next call dials, and the
	// stopped daemon's socket takes the connection and never answers it.
	_, took, err = callWithin(t, 10*time.Second, h, "summary", `{"session_id":"s"}`)
	if codeOf(err) != "unavailable" || !strings.Contains(messageOf(err), "no answer to summary from cairnd within 400ms") || took < 400*time.Millisecond {
		t.Fatalf("summary on a stopped daemon, redialing: %v (code %s) after %v, want unavailable, no answer within 400ms", err, codeOf(err), took)
	}

	resume()
	var out []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, err = callWithin(t, 10*time.Second, h, "messages", `{"session_id":"s"}`)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("messages once the daemon runs again: %v", err)
	}
	if !strings.Contains(string(out), `"one"`) || strings.Contains(string(out), `big x`) {
		t.Fatalf("messages once the daemon runs again: %.200s, want the first save and not the cut one", out)
	}
}

// TestCallTimeoutRange: call_timeout_ms is checked at cairn_open.
func TestCallTimeoutRange(t *testing.T) {
	ws := t.TempDir()
	for _, v := range []string{"-1", "86400001"} {
		_, err := openHandle(fmt.Sprintf(`{"workspace":%q,"auto_start":false,"call_timeout_ms":%s}`, ws, v))
		if codeOf(err) != "invalid_argument" || !strings.Contains(messageOf(err), "call_timeout_ms") {
			t.Fatalf("call_timeout_ms %s: %v, want invalid_argument naming call_timeout_ms", v, err)
		}
	}
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"call_timeout_ms":1000}`, ws))
	if err != nil {
		t.Fatalf("embedded open with call_timeout_ms: %v", err)
	}
	_ = closeHandle(h)
}

// TestCallTimeoutDefault: a handle opened without call_timeout_ms bounds
// its calls by defaultCallTimeout (shortened here), and one given 0 waits
// as long as the daemon takes. Neither bound touches the methods whose
// work grows with the store (verify here): on a stopped daemon they wait,
// and finish once it runs again.
func TestCallTimeoutDefault(t *testing.T) {
	defer func(d time.Duration) { defaultCallTimeout = d }(defaultCallTimeout)
	defaultCallTimeout = 400 * time.Millisecond
	h, pid := daemonHandleWith(t, "")
	if _, err := call(h, "save", []byte(`{"session_id":"s","change":{"append_messages":[{"role":"user","content":"one"}]}}`)); err != nil {
		t.Fatal(err)
	}
	in, err := lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	unbounded, err := openHandle(fmt.Sprintf(`{"workspace":%q,"auto_start":false,"call_timeout_ms":0}`, in.workspace))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeHandle(unbounded) }()
	resume := testkit.Stop(t, pid)

	// Both waits start before the bounded call, which takes 400 ms.
	type result struct {
		method string
		out    []byte
		err    error
	}
	waiting := make(chan result, 2)
	go func() {
		out, err := call(unbounded, "summary", []byte(`{"session_id":"s"}`))
		waiting <- result{"summary with call_timeout_ms 0", out, err}
	}()
	go func() {
		out, err := call(h, "verify", nil)
		waiting <- result{"verify", out, err}
	}()

	_, took, err := callWithin(t, 10*time.Second, h, "summary", `{"session_id":"s"}`)
	if codeOf(err) != "unavailable" || !strings.Contains(messageOf(err), "no answer to summary from cairnd within 400ms") || took < 400*time.Millisecond {
		t.Fatalf("summary on a stopped daemon, no call_timeout_ms: %v (code %s) after %v, want unavailable, no answer within 400ms", err, codeOf(err), took)
	}
	select {
	case r := <-waiting:
		t.Fatalf("%s on a stopped daemon returned %v, %.100s; want it waiting", r.method, r.err, r.out)
	case <-time.After(time.Second):
	}
	resume()
	for range 2 {
		select {
		case r := <-waiting:
			if r.err != nil {
				t.Fatalf("%s once the daemon runs again: %v", r.method, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call still waiting 10s after the daemon runs again")
		}
	}
}

// TestOpenOnAStoppedDaemon: cairn_open in daemon mode gives up on a daemon
// that takes the connection and never answers it once connectTimeout
// (shortened here) passes, with unavailable naming its pid and that it is
// stopped, rather than waiting for ever or saying only that a deadline
// passed.
func TestOpenOnAStoppedDaemon(t *testing.T) {
	defer func(d time.Duration) { connectTimeout = d }(connectTimeout)
	connectTimeout = time.Second
	h, pid := daemonHandleWith(t, "")
	in, err := lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Stop(t, pid)
	opened, _, err := returnsWithin(t, 10*time.Second, "cairn_open on a stopped daemon", func() (uint64, error) {
		return openHandle(fmt.Sprintf(`{"workspace":%q,"auto_start":false}`, in.workspace))
	})
	if err == nil {
		_ = closeHandle(opened)
	}
	want := fmt.Sprintf("cairnd (pid %d) did not answer the connection within 1s: it is stopped", pid)
	if codeOf(err) != "unavailable" || !strings.Contains(messageOf(err), want) {
		t.Fatalf("cairn_open on a stopped daemon: %v (code %s), want unavailable: %s", err, codeOf(err), want)
	}
}

// TestBindingsKeepTheDefaultCallTimeout: the Python, Node.js and Rust
// bindings' own checkpoint connections wait for an answer as long as
// libcairn's default call timeout, each in its own constant; this keeps the
// four from drifting apart.
func TestBindingsKeepTheDefaultCallTimeout(t *testing.T) {
	want := defaultCallTimeout
	for _, b := range []struct {
		path, re string
		unit     time.Duration
	}{
		{"../bindings/python/cairn/_wire.py", `(?m)^ANSWER_TIMEOUT = ([0-9.]+)$`, time.Second},
		{"../bindings/node/checkpoint-wire.js", `(?m)^const ANSWER_TIMEOUT_MS = ([0-9]+);$`, time.Millisecond},
		{"../bindings/rust/cairn/src/wire.rs", `(?m)^const ANSWER_TIMEOUT: Duration = Duration::from_secs\(([0-9]+)\);$`, time.Second},
	} {
		src, err := os.ReadFile(b.path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(b.re).FindSubmatch(src)
		if m == nil {
			t.Fatalf("%s: no line matching %s", b.path, b.re)
		}
		n, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(n * float64(b.unit)); got != want {
			t.Errorf("%s: answer timeout %v, libcairn's default call timeout %v", b.path, got, want)
		}
	}
}
