package procs

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/proc"
	"github.com/cairn-dev/cairn/session"
)

// TestProcessLifecycle is the real-process test: a recorded HTTP
// server is healthy, killed it is not_running, Restart brings it back
// healthy, and a Restart of a healthy process starts nothing.
func TestProcessLifecycle(t *testing.T) {
	p := serverProcess(t, "web")
	rt := &session.Runtime{Processes: []session.Process{p}}
	_, stop := startDirect(t, p)
	if st := waitState(t, p, StateHealthy, 10*time.Second); st.State != StateHealthy {
		t.Fatalf("running server: %+v, want healthy", st)
	}
	if got := Probe(t.Context(), rt, time.Second); len(got) != 1 || got[0].State != StateHealthy || got[0].Name != "web" {
		t.Fatalf("Probe = %+v, want web healthy", got)
	}

	stop() // the runtime goes away, as it does when a machine restarts
	got := Probe(t.Context(), rt, time.Second)
	if got[0].State != StateNotRunning || !strings.Contains(got[0].Detail, "connection refused") {
		t.Fatalf("after kill: %+v, want not_running (connection refused)", got[0])
	}

	logs := logDir(t)
	res, err := Restart(t.Context(), p, Options{LogDir: logs, Timeout: 10 * time.Second})
	reapOnCleanup(t, res.PID)
	if err != nil {
		t.Fatalf("Restart: %v (%+v)", err, res)
	}
	if res.Outcome != OutcomeStarted || res.State != StateHealthy || res.PID <= 0 || res.Log != filepath.Join(logs, "web.log") {
		t.Fatalf("Restart = %+v", res)
	}
	if !strings.Contains(res.Detail, "status 200") {
		t.Errorf("Detail %q does not say what proved it", res.Detail)
	}
	if pgid, err := syscall.Getpgid(res.PID); err != nil || pgid != res.PID {
		t.Errorf("started process is not its own group leader: pgid %d, %v", pgid, err)
	}
	if _, sid := procGroups(t, res.PID); sid != res.PID {
		t.Errorf("started process is not in its own session: sid %d", sid)
	}
	if got := Probe(t.Context(), rt, time.Second); got[0].State != StateHealthy {
		t.Fatalf("after Restart: %+v, want healthy", got[0])
	}
	if fi, err := os.Stat(logs); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("log dir: %v %v, want 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(res.Log); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file: %v %v, want 0600", fi.Mode(), err)
	}

	again, err := Restart(t.Context(), p, Options{LogDir: logs, Timeout: 10 * time.Second})
	if err != nil || again.Outcome != OutcomeAlreadyHealthy || again.State != StateHealthy || again.PID != 0 {
		t.Fatalf("Restart of a healthy process = %+v, %v; want already_healthy, nothing started", again, err)
	}
	b, _ := os.ReadFile(res.Log)
	if n := strings.Count(string(b), "--- cairn: restarting"); n != 1 {
		t.Errorf("log shows %d starts, want 1:\n%s", n, b)
	}
}

// TestRestartTimeoutKillsGroup: a health check that never passes ends in
// a timeout error naming the last failure, and the started process and its
// children are gone afterwards, whether they honour SIGTERM or not.
func TestRestartTimeoutKillsGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"honours SIGTERM", nil},
		{"ignores SIGTERM", []string{"--ignore-term"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
			p := serverProcess(t, "never-healthy", append([]string{"--status", "503", "--spawn", pidFile}, tc.extra...)...)
			res, err := Restart(t.Context(), p, Options{LogDir: logDir(t), Timeout: time.Second, CheckTimeout: 500 * time.Millisecond, KillGrace: 300 * time.Millisecond})
			reapOnCleanup(t, res.PID)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			for _, want := range []string{`"never-healthy"`, "last failure", "status 503, want 200", "killed"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if res.Outcome != OutcomeFailed || res.State != StateNotRunning || res.PID <= 0 || res.Error != err.Error() {
				t.Errorf("Result = %+v", res)
			}
			grandchild := readPID(t, pidFile, time.Second)
			t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
			if !proc.Gone(res.PID) {
				t.Errorf("started process %d still exists after Restart returned", res.PID)
			}
			if !waitGone(grandchild, 5*time.Second) {
				t.Errorf("grandchild %d survived the group kill", grandchild)
			}
			if st := ProbeProcess(t.Context(), p, time.Second); st.State != StateNotRunning {
				t.Errorf("after the failed restart: %+v, want not_running", st)
			}
		})
	}
}

func TestRestartExitedFailsFast(t *testing.T) {
	p := serverProcess(t, "crasher")
	p.Command = []string{testExe(t), childArg, "exit", "3"}
	res, err := Restart(t.Context(), p, Options{LogDir: logDir(t), Timeout: time.Minute})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("err = %v, want ErrExited with exit status 3", err)
	}
	if res.TookMS > 30_000 {
		t.Errorf("waited %d ms for a process that exited at once", res.TookMS)
	}
	if b, _ := os.ReadFile(res.Log); !strings.Contains(string(b), "exiting with 3") {
		t.Errorf("log lacks the process's output:\n%s", b)
	}
}

func TestRestartCanceled(t *testing.T) {
	p := serverProcess(t, "slow", "--status", "503")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := Restart(ctx, p, Options{LogDir: logDir(t), Timeout: time.Minute, KillGrace: 200 * time.Millisecond})
	reapOnCleanup(t, res.PID)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.PID > 0 && !proc.Gone(res.PID) {
		t.Errorf("process %d left running after a cancelled restart", res.PID)
	}
}

func TestRestartPortBusy(t *testing.T) {
	// Something that is not the recorded server holds its port and never
	// answers HTTP.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	p := serverProcess(t, "web")
	p.Port = port
	p.HealthCheck.URL = "http://" + ln.Addr().String() + "/healthz"
	logs := logDir(t)
	res, err := Restart(t.Context(), p, Options{LogDir: logs, Timeout: 5 * time.Second, CheckTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrPortBusy) || res.PID != 0 || res.Outcome != OutcomeFailed {
		t.Fatalf("Restart on a busy port = %+v, %v; want ErrPortBusy, nothing started", res, err)
	}
	if _, err := os.Stat(logs); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused restart created %s", logs)
	}
}

func TestRestartNoHealthCheck(t *testing.T) {
	t.Run("port only", func(t *testing.T) {
		p := serverProcess(t, "web")
		p.HealthCheck = nil
		res, err := Restart(t.Context(), p, Options{LogDir: logDir(t), Timeout: 10 * time.Second})
		reapOnCleanup(t, res.PID)
		if err != nil || res.Outcome != OutcomeStarted || res.State != StateUnknown || !strings.Contains(res.Detail, "accepts connections") {
			t.Fatalf("Restart = %+v, %v; want started, state unknown, port accepting", res, err)
		}
		// A second restart must not start another copy on the port.
		again, err := Restart(t.Context(), p, Options{LogDir: logDir(t), Timeout: 10 * time.Second})
		if !errors.Is(err, ErrPortBusy) || again.PID != 0 {
			t.Errorf("second Restart = %+v, %v; want ErrPortBusy", again, err)
		}
	})
	t.Run("nothing to check", func(t *testing.T) {
		p := session.Process{Name: "sleeper", Command: []string{testExe(t), childArg, "sleep"}}
		res, err := Restart(t.Context(), p, Options{LogDir: logDir(t), Timeout: 300 * time.Millisecond})
		reapOnCleanup(t, res.PID)
		if err != nil || res.Outcome != OutcomeStarted || res.State != StateUnknown || res.PID <= 0 {
			t.Fatalf("Restart = %+v, %v; want started, state unknown", res, err)
		}
	})
}

// TestRestartCommandHealthCheckInCwd: the health command runs directly in
// the process's cwd, with the expected exit code.
func TestRestartCommandHealthCheckInCwd(t *testing.T) {
	p := serverProcess(t, "web")
	// The health command succeeds only in p.Cwd, where the marker is.
	if err := os.WriteFile(filepath.Join(p.Cwd, "ready"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p.HealthCheck = &session.HealthCheck{Command: []string{testExe(t), childArg, "check", "ready"}}
	if st := ProbeProcess(t.Context(), p, time.Second); st.State != StateHealthy {
		t.Fatalf("marker present: %+v, want healthy", st)
	}
	p.HealthCheck.Command[3] = "not-there"
	if st := ProbeProcess(t.Context(), p, time.Second); st.State != StateNotRunning || !strings.Contains(st.Detail, "exited 3, want 0") {
		t.Fatalf("check fails, port closed: %+v, want not_running", st)
	}
	p.HealthCheck.ExpectExit = 3
	if st := ProbeProcess(t.Context(), p, time.Second); st.State != StateHealthy {
		t.Fatalf("expect_exit 3: %+v, want healthy", st)
	}
}

// TestSecretsNeverLeave sets a secret in the environment and checks that
// the value reaches the process (its health check needs it) but appears
// nowhere in what Restart and Probe return or write.
func TestSecretsNeverLeave(t *testing.T) {
	const secret = "s3cr3t-value"
	t.Setenv("CAIRN_TEST_SECRET", secret)
	p := serverProcess(t, "web", "--need-env", "CAIRN_TEST_SECRET")
	p.EnvKeys = []string{"CAIRN_TEST_SECRET", "CAIRN_TEST_ABSENT_KEY"}
	logs := logDir(t)
	var out []any
	res, err := Restart(t.Context(), p, Options{LogDir: logs, Timeout: 10 * time.Second})
	reapOnCleanup(t, res.PID)
	if err != nil || res.State != StateHealthy {
		t.Fatalf("Restart = %+v, %v; want healthy (the process must see the variable)", res, err)
	}
	if !slices.Equal(res.MissingEnv, []string{"CAIRN_TEST_ABSENT_KEY"}) {
		t.Errorf("MissingEnv = %v, want [CAIRN_TEST_ABSENT_KEY]", res.MissingEnv)
	}
	out = append(out, res)
	again, err := Restart(t.Context(), p, Options{LogDir: logs})
	out = append(out, again, errString(err))
	out = append(out, Probe(t.Context(), &session.Runtime{Processes: []session.Process{p}}, time.Second))

	// A failing restart's error and result too.
	bad := serverProcess(t, "bad", "--status", "500")
	bad.EnvKeys = p.EnvKeys
	fres, ferr := Restart(t.Context(), bad, Options{LogDir: logs, Timeout: 500 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	reapOnCleanup(t, fres.PID)
	out = append(out, fres, errString(ferr))

	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("a result holds the secret value: %s", b)
	}
	filepath.WalkDir(logs, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(path); strings.Contains(string(b), secret) {
			t.Errorf("%s holds the secret value", path)
		}
		return nil
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRestartInvalid(t *testing.T) {
	good := session.Process{Name: "x", Command: []string{"true"}}
	cases := []struct {
		name string
		p    session.Process
		opts Options
	}{
		{"no log dir", good, Options{}},
		{"no command", session.Process{Name: "x"}, Options{LogDir: "d"}},
		{"non-loopback health URL", session.Process{Name: "x", Command: []string{"true"}, HealthCheck: &session.HealthCheck{URL: "http://192.0.2.1/"}}, Options{LogDir: "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.opts.LogDir != "" {
				tc.opts.LogDir = filepath.Join(dir, tc.opts.LogDir)
			}
			res, err := Restart(t.Context(), tc.p, tc.opts)
			if session.CodeOf(err) != session.CodeInvalidArgument || res.PID != 0 {
				t.Fatalf("Restart = %+v, %v; want invalid_argument, nothing started", res, err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("an invalid restart wrote %v", entries)
			}
		})
	}
}

func TestLogName(t *testing.T) {
	cases := map[string]string{
		"web":        "web.log",
		"api-v2.dev": "api-v2.dev.log",
	}
	for in, want := range cases {
		if got := LogName(in); got != want {
			t.Errorf("LogName(%q) = %q, want %q", in, got, want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"../x", "a/b", "a_b", ".hidden", "..", "x y", strings.Repeat("n", 300), "ü"} {
		got := LogName(in)
		if strings.ContainsAny(got, "/\\") || strings.HasPrefix(got, ".") || filepath.Base(got) != got {
			t.Errorf("LogName(%q) = %q is not a plain file name", in, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("LogName(%q) = LogName(%q) = %q", in, prev, got)
		}
		seen[got] = in
	}
}
