package procs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/session"
)

func urlProcess(name, url string, expect int) session.Process {
	return session.Process{Name: name, Command: []string{"unused"}, HealthCheck: &session.HealthCheck{URL: url, ExpectStatus: expect}}
}

func TestProbeHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/broken":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/away":
			http.Redirect(w, r, "http://192.0.2.1/ok", http.StatusFound)
		}
	}))
	defer srv.Close()
	hang, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	closedPort := freePort(t)
	localhostURL := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)

	cases := []struct {
		name   string
		p      session.Process
		state  string
		detail string
	}{
		{"ok", urlProcess("a", srv.URL+"/ok", 0), StateHealthy, "status 200"},
		{"localhost", urlProcess("a", localhostURL+"/ok", 0), StateHealthy, "status 200"},
		{"wrong status", urlProcess("a", srv.URL+"/broken", 0), StateUnhealthy, "status 503, want 200"},
		{"expected non-200", urlProcess("a", srv.URL+"/broken", 503), StateHealthy, "status 503"},
		{"redirect not followed", urlProcess("a", srv.URL+"/away", 0), StateUnhealthy, "status 302, want 200"},
		{"refused", urlProcess("a", "http://127.0.0.1:"+itoa(closedPort)+"/", 0), StateNotRunning, "connection refused"},
		{"no answer", urlProcess("a", "http://"+hang.Addr().String()+"/", 0), StateUnhealthy, "no answer in time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := ProbeProcess(t.Context(), tc.p, 300*time.Millisecond)
			if st.State != tc.state || !strings.Contains(st.Detail, tc.detail) {
				t.Errorf("ProbeProcess = %+v, want %s with %q", st, tc.state, tc.detail)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestNonLoopbackNeverDialled: a health check URL off loopback is refused
// with a clear error and no connection is attempted, neither for it nor
// for a redirect off loopback.
func TestNonLoopbackNeverDialled(t *testing.T) {
	var mu sync.Mutex
	var dialled []string
	dialHook = func(addr string) { mu.Lock(); dialled = append(dialled, addr); mu.Unlock() }
	defer func() { dialHook = nil }()
	takeDialled := func() []string {
		mu.Lock()
		defer mu.Unlock()
		d := dialled
		dialled = nil
		return d
	}

	for _, raw := range []string{
		"http://192.0.2.1/healthz",
		"http://10.0.0.1:8080/",
		"http://0.0.0.0:3000/",
		"http://[2001:db8::1]/",
		"http://[::ffff:192.0.2.1]/",
		"http://example.com/",
		"http://localhost.example.com/",
		"http://127.0.0.1.nip.io/",
		"http://[fe80::1%25lo]/",
	} {
		t.Run(raw, func(t *testing.T) {
			_, err := ValidateURL(raw)
			if !errors.Is(err, ErrNotLoopback) || session.CodeOf(err) != session.CodeInvalidArgument {
				t.Errorf("ValidateURL(%q) = %v, want ErrNotLoopback / invalid_argument", raw, err)
			}
			st := ProbeProcess(t.Context(), urlProcess("remote", raw, 0), time.Second)
			if st.State != StateUnknown || !strings.Contains(st.Detail, "not loopback") {
				t.Errorf("Probe = %+v, want unknown, refused as not loopback", st)
			}
			// The dialer refuses it on its own too.
			u, _ := url.Parse(raw)
			port := u.Port()
			if port == "" {
				port = "80"
			}
			if c, err := dialLoopback(t.Context(), "tcp", net.JoinHostPort(u.Hostname(), port)); err == nil {
				c.Close()
				t.Errorf("dialLoopback accepted %s", raw)
			}
		})
	}
	for _, a := range takeDialled() {
		t.Errorf("dialled %s", a)
	}

	// A redirect off loopback is answered, not followed.
	srv := httptest.NewServer(http.RedirectHandler("http://192.0.2.1/", http.StatusFound))
	defer srv.Close()
	if st := ProbeProcess(t.Context(), urlProcess("r", srv.URL, 0), time.Second); st.State != StateUnhealthy {
		t.Errorf("redirect: %+v, want unhealthy (302)", st)
	}
	for _, a := range takeDialled() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("followed a redirect to %s", a)
		}
	}
}

func TestValidateURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:3000/healthz", "http://127.1.2.3/", "https://localhost:8443/x", "http://LOCALHOST/", "http://[::1]:9/"} {
		if _, err := ValidateURL(u); err != nil {
			t.Errorf("ValidateURL(%q) = %v", u, err)
		}
	}
	for u, want := range map[string]string{
		"ftp://127.0.0.1/":         "scheme",
		"http://user:pw@127.0.0.1": "credentials",
		"http:///x":                "no host",
		"localhost:80":             "scheme",
		"http://%zz":               "does not parse",
	} {
		_, err := ValidateURL(u)
		if session.CodeOf(err) != session.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateURL(%q) = %v, want invalid_argument with %q", u, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// TestProbeConcurrent proves the checks overlap without timing anything:
// the health endpoint answers only once every process's check is in
// flight at the same time.
func TestProbeConcurrent(t *testing.T) {
	const n = 6
	var inFlight atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inFlight.Add(1) == n {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
		case <-r.Context().Done():
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	}))
	defer srv.Close()
	rt := &session.Runtime{}
	for i := range n {
		rt.Processes = append(rt.Processes, urlProcess("p"+itoa(i), srv.URL+"/", 0))
	}
	got := Probe(t.Context(), rt, 5*time.Second)
	for i, st := range got {
		if st.Name != rt.Processes[i].Name || st.State != StateHealthy {
			t.Errorf("Probe[%d] = %+v, want %s healthy (in order)", i, st, rt.Processes[i].Name)
		}
	}
	if got := Probe(t.Context(), nil, time.Second); got == nil || len(got) != 0 {
		t.Errorf("Probe(nil) = %#v, want an empty list", got)
	}
}

func TestProbeCommand(t *testing.T) {
	dir := t.TempDir()
	exe := testExe(t)
	cases := []struct {
		name   string
		p      session.Process
		state  string
		detail string
	}{
		{"fails, no port", session.Process{Name: "a", Command: []string{"x"}, Cwd: dir, HealthCheck: &session.HealthCheck{Command: []string{exe, childArg, "exit", "1"}}}, StateUnhealthy, "exited 1, want 0"},
		{"passes", session.Process{Name: "a", Command: []string{"x"}, Cwd: dir, HealthCheck: &session.HealthCheck{Command: []string{exe, childArg, "exit", "0"}}}, StateHealthy, "exited 0"},
		{"cannot run", session.Process{Name: "a", Command: []string{"x"}, Cwd: dir, HealthCheck: &session.HealthCheck{Command: []string{"/nonexistent/cairn-check"}}}, StateUnknown, "cannot run"},
		{"hangs", session.Process{Name: "a", Command: []string{"x"}, Cwd: dir, HealthCheck: &session.HealthCheck{Command: []string{exe, childArg, "sleep"}}}, StateUnhealthy, "did not finish in time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := ProbeProcess(t.Context(), tc.p, 500*time.Millisecond)
			if st.State != tc.state || !strings.Contains(st.Detail, tc.detail) {
				t.Errorf("ProbeProcess = %+v, want %s with %q", st, tc.state, tc.detail)
			}
		})
	}
}

func TestProbePortOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	open := ln.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name  string
		p     session.Process
		state string
	}{
		{"listening", session.Process{Name: "a", Command: []string{"x"}, Port: open}, StateUnknown},
		{"closed", session.Process{Name: "a", Command: []string{"x"}, Port: freePort(t)}, StateNotRunning},
		{"nothing recorded", session.Process{Name: "a", Command: []string{"x"}}, StateUnknown},
		{"no command is fine for a probe", session.Process{Name: "a", Port: freePort(t)}, StateNotRunning},
		{"invalid record", session.Process{Name: "a", Port: -1}, StateUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if st := ProbeProcess(t.Context(), tc.p, time.Second); st.State != tc.state || st.Detail == "" {
				t.Errorf("ProbeProcess = %+v, want %s with a detail", st, tc.state)
			}
		})
	}
}

func TestProbeCancelled(t *testing.T) {
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	st := ProbeProcess(ctx, urlProcess("a", "http://"+hang.Addr().String()+"/", 0), time.Minute)
	if st.State != StateUnknown || !strings.Contains(st.Detail, "cancelled") {
		t.Errorf("cancelled probe = %+v, want unknown", st)
	}
}

// FuzzValidateURL checks that every URL ValidateURL accepts has a host
// the loopback dialer accepts too, so nothing it lets through can be
// dialled off loopback.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:3000/healthz", "http://localhost/", "http://[::1]:80/", "http://192.0.2.1/",
		"http://127.0.0.1@192.0.2.1/", "http://192.0.2.1#@127.0.0.1/", "http://127.0.0.1.nip.io/", "http://[::ffff:7f00:1]/",
		"http://0x7f.1/", "http://2130706433/", "http://127.1/", "http://localhost./",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ValidateURL(raw)
		if err != nil {
			return
		}
		host := u.Hostname()
		if !strings.EqualFold(host, "localhost") {
			ip := net.ParseIP(host)
			if ip == nil || !ip.IsLoopback() {
				t.Fatalf("ValidateURL(%q) accepted host %q", raw, host)
			}
		}
		port := u.Port()
		if port == "" {
			port = "1"
		}
		// A cancelled context: the dialer decides, but connects to nothing.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c, err := dialLoopback(ctx, "tcp", net.JoinHostPort(host, port))
		if c != nil {
			c.Close()
		}
		if errors.Is(err, ErrNotLoopback) {
			t.Fatalf("ValidateURL accepted %q but the dialer refuses it", raw)
		}
	})
}
