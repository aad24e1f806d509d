//go:build cgo

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// TestCProgram builds libcairn.so and cairnd, compiles the C test program
// against the public header, runs it (embedded and daemon mode), and checks
// that it finished with no handle left open. The daemon it started is
// stopped here.
func TestCProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shared library and the daemon")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: the C ABI test needs a C compiler")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib")
	run(t, "go", "build", "-buildmode=c-shared", "-o", filepath.Join(lib, "libcairn.so"), ".")
	run(t, "go", "build", "-o", filepath.Join(dir, "cairnd"), "../cmd/cairnd")
	prog := filepath.Join(dir, "cairn_test")
	run(t, gcc, "-Wall", "-Werror", "-o", prog, "ctest/cairn_test.c", "-I.", "-L"+lib, "-lcairn", "-Wl,-rpath,"+lib, "-lpthread")

	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, ws, filepath.Join(dir, "cairnd"))
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(`daemon_pid=(\d+)`).FindSubmatch(out); m != nil {
		pid, _ := strconv.Atoi(string(m[1]))
		stopProcess(t, pid)
	}
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("C test program failed: %v", err)
	}
	if !strings.Contains(string(out), "handles_open=0\n") {
		t.Fatalf("handles left open")
	}
	if n := strings.Count(string(out), "\nok "); n < 40 {
		t.Fatalf("only %d checks ran", n)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// stopProcess sends SIGTERM and waits (bounded) for pid to exit.
func stopProcess(t *testing.T, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("daemon %d did not stop on SIGTERM", pid)
}

// TestMethodsEmbedded runs every method of the C API's table through the
// same path cairn_call takes, in embedded mode, and checks that the handle
// count returns to zero.
func TestMethodsEmbedded(t *testing.T) {
	ws := t.TempDir()
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, ws))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, params string) map[string]any {
		t.Helper()
		out, err := call(h, method, []byte(params))
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: %v in %s", method, err, out)
		}
		return m
	}
	fails := func(method, params, code string) {
		t.Helper()
		_, err := call(h, method, []byte(params))
		if got := codeOf(err); got != code {
			t.Fatalf("%s %s: code %q (%v), want %q", method, params, got, err, code)
		}
	}
	sub := do("subscribe", `{"events":["session.committed"]}`)["subscription"]
	if do("status", "")["mode"] != "embedded" {
		t.Fatal("status mode")
	}
	if caps := do("hello", "{}")["capabilities"].(map[string]any); caps["store"].(map[string]any)["durable"] != true {
		t.Fatalf("hello capabilities: %v", caps)
	}
	do("save", `{"session_id":"s","change":{"append_messages":[{"m":1}]}}`)
	run := do("beginRun", `{"session_id":"s"}`)["run_id"].(string)
	do("checkpoint", fmt.Sprintf(`{"run_id":%q,"turn":1,"new_messages":[{"m":2}],"usage":{"total_tokens":5},"tool_calls_count":1,"state":{"k":1}}`, run))
	rs := do("resumeSession", `{"session_id":"s"}`)
	if ir := rs["interrupted_runs"].([]any); len(ir) != 1 {
		t.Fatalf("interrupted runs: %v", ir)
	}
	do("save", fmt.Sprintf(`{"session_id":"s","change":{"append_artifacts":[{"id":"a","data":"aGk=","metadata":{"k":1}}],"append_traces":[{"run_id":%q,"type":"tool"}]}}`, run))
	trimmed := do("resumeSession", `{"session_id":"s","messages_tail":1,"artifacts":"metadata","traces":"none","drift":false,"processes":false}`)
	if snap := trimmed["snapshot"].(map[string]any); len(snap["messages"].([]any)) != 1 || trimmed["messages_from"].(float64) != 1 ||
		trimmed["message_count"].(float64) != 2 || snap["artifacts"].([]any)[0].(map[string]any)["data"] != nil || snap["traces"] != nil {
		t.Fatalf("trimmed resume: %v", trimmed)
	}
	if sum := do("summary", `{"session_id":"s"}`); sum["message_count"].(float64) != 2 || sum["artifact_count"].(float64) != 1 {
		t.Fatalf("summary: %v", sum)
	}
	if m := do("messages", `{"session_id":"s","tail":1}`); m["from"].(float64) != 1 || len(m["messages"].([]any)) != 1 {
		t.Fatalf("messages: %v", m)
	}
	if a := do("artifact", `{"session_id":"s","artifact_id":"a"}`)["artifact"].(map[string]any); a["data"] != "aGk=" {
		t.Fatalf("artifact: %v", a)
	}
	if l := do("artifacts", `{"session_id":"s"}`)["artifacts"].([]any); len(l) != 1 || l[0].(map[string]any)["data"] != nil {
		t.Fatalf("artifacts: %v", l)
	}
	if r := do("run", fmt.Sprintf(`{"run_id":%q}`, run)); r["checkpoint"] == nil || r["session_id"] != "s" {
		t.Fatalf("run: %v", r)
	}
	if l := do("runs", `{"session_id":"s"}`)["runs"].([]any); len(l) != 1 {
		t.Fatalf("runs: %v", l)
	}
	if ev := do("runEvents", fmt.Sprintf(`{"run_id":%q}`, run))["events"].([]any); len(ev) != 2 {
		t.Fatalf("runEvents: %v", ev)
	}
	fails("messages", `{"session_id":"s","tail":-1}`, "invalid_argument")
	fails("artifact", `{"session_id":"s","artifact_id":"nope"}`, "not_found")
	rr := do("resumeRun", fmt.Sprintf(`{"run_id":%q,"session_id":"s"}`, run))
	if rr["resumed_from"] != run || rr["tool_calls_count"].(float64) != 1 || len(rr["messages"].([]any)) != 2 {
		t.Fatalf("resumeRun: %v", rr)
	}
	do("completeRun", fmt.Sprintf(`{"run_id":%q,"status":"completed"}`, rr["run_id"]))
	do("beginWorkflow", `{"workflow_id":"w","steps":[{"step_id":"a","identity":"1"}]}`)
	do("completeStep", `{"workflow_id":"w","step_id":"a","identity":"1","result":42}`)
	fails("beginWorkflow", `{"workflow_id":"w","steps":[{"step_id":"a","identity":"2"}]}`, "step_identity_changed")
	do("finishWorkflow", `{"workflow_id":"w"}`)
	if l := do("list", "")["sessions"].([]any); len(l) != 1 {
		t.Fatalf("list: %v", l)
	}
	do("fork", `{"session_id":"s","new_id":"f"}`)
	env := do("export", `{"session_id":"f"}`)["envelope"]
	envJSON, _ := json.Marshal(env)
	do("delete", `{"session_id":"f"}`)
	if got := do("import", fmt.Sprintf(`{"envelope":%s}`, envJSON))["session_id"]; got != "f" {
		t.Fatalf("import: %v", got)
	}
	ev := do("nextEvent", fmt.Sprintf(`{"subscription":%v,"timeout_ms":1000}`, sub))
	if e := ev["event"].(map[string]any); e["event"] != "session.committed" {
		t.Fatalf("event: %v", ev)
	}
	do("unsubscribe", fmt.Sprintf(`{"subscription":%v}`, sub))
	if !do("nextEvent", fmt.Sprintf(`{"subscription":%v}`, sub))["closed"].(bool) {
		t.Fatal("nextEvent after unsubscribe should report closed")
	}
	fails("nosuch", "", "method_not_found")
	fails("save", `{"session_id":1}`, "invalid_argument")
	fails("subscribe", `{"events":["nope"]}`, "invalid_argument")
	fails("resumeRun", `{"run_id":"x"}`, string(session.CodeNoCheckpoint))
	if err := closeHandle(h); err != nil {
		t.Fatal(err)
	}
	if _, err := call(h, "status", nil); codeOf(err) != "bad_handle" {
		t.Fatalf("call after close: %v", err)
	}
	if n := openCount.Load(); n != 0 {
		t.Fatalf("%d handles left open", n)
	}
}

// TestMaxSessionBytes: with max_session_bytes set, a save that would take a
// session past it is too_large and writes nothing; an edit that shrinks the
// session is still taken, so no session is ever write-only; every message
// stays readable.
func TestMaxSessionBytes(t *testing.T) {
	ws := t.TempDir()
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"max_session_bytes":65536}`, ws))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeHandle(h) })
	big := fmt.Sprintf(`{"session_id":"s","change":{"append_messages":[{"pad":%q}]}}`, strings.Repeat("p", 20000))
	var saved int
	for ; saved < 10; saved++ {
		if _, err := call(h, "save", []byte(big)); err != nil {
			if codeOf(err) != "too_large" || !strings.Contains(err.Error(), "truncate") {
				t.Fatalf("save %d: %v, want too_large saying how to shrink", saved, err)
			}
			break
		}
	}
	if saved == 0 || saved == 10 {
		t.Fatalf("%d saves of 20 KB went in under a 64 KiB limit", saved)
	}
	sum, err := call(h, "summary", []byte(`{"session_id":"s"}`))
	if err != nil || !strings.Contains(string(sum), fmt.Sprintf(`"message_count":%d`, saved)) {
		t.Fatalf("summary after the refused save: %s, %v (want %d messages)", sum, err, saved)
	}
	if _, err := call(h, "save", []byte(`{"session_id":"s","change":{"truncate_messages":1}}`)); err != nil {
		t.Fatalf("a truncation of a session at its limit: %v", err)
	}
	if _, err := call(h, "save", []byte(big)); err != nil {
		t.Fatalf("save after truncating: %v", err)
	}
	if _, err := call(h, "messages", []byte(`{"session_id":"s"}`)); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if _, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"max_session_bytes":-1}`, t.TempDir())); codeOf(err) != "invalid_argument" {
		t.Fatalf("negative max_session_bytes: %v", err)
	}
}
