package procs

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

func TestValidate(t *testing.T) {
	ok := session.Process{Name: "web", Command: []string{"npm", "run", "dev"}, Port: 3000, EnvKeys: []string{"PORT"},
		HealthCheck: &session.HealthCheck{URL: "http://127.0.0.1:3000/healthz"}}
	with := func(f func(p *session.Process)) *session.Runtime {
		p := ok
		hc := *ok.HealthCheck
		p.HealthCheck = &hc
		f(&p)
		return &session.Runtime{Processes: []session.Process{p}}
	}
	cases := []struct {
		name string
		rt   *session.Runtime
		want string
	}{
		{"nil", nil, ""},
		{"ok", with(func(p *session.Process) {}), ""},
		{"command check", with(func(p *session.Process) {
			p.HealthCheck = &session.HealthCheck{Command: []string{"curl", "-f", "x"}, ExpectExit: 0}
		}), ""},
		{"no name", with(func(p *session.Process) { p.Name = "" }), "has no name"},
		{"no command", with(func(p *session.Process) { p.Command = nil }), "has no command"},
		{"empty program", with(func(p *session.Process) { p.Command = []string{""} }), "has no command"},
		{"port", with(func(p *session.Process) { p.Port = 70000 }), "out of range"},
		{"env value", with(func(p *session.Process) { p.EnvKeys = []string{"TOKEN=abc"} }), "names only"},
		{"both checks", with(func(p *session.Process) { p.HealthCheck.Command = []string{"true"} }), "not both"},
		{"remote URL", with(func(p *session.Process) { p.HealthCheck.URL = "http://10.1.2.3/" }), "is not loopback"},
		{"bad status", with(func(p *session.Process) { p.HealthCheck.ExpectStatus = 42 }), "not an HTTP status"},
		{"duplicate", &session.Runtime{Processes: []session.Process{ok, ok}}, "recorded twice"},
		{"preview of unknown process", &session.Runtime{Processes: []session.Process{ok}, Previews: []session.Preview{{URL: "http://127.0.0.1:3000/", Process: "api"}}}, "not recorded"},
		{"preview without url", &session.Runtime{Previews: []session.Preview{{}}}, "no url"},
		{"preview ok", &session.Runtime{Processes: []session.Process{ok}, Previews: []session.Preview{{URL: "https://preview.example.com/", Process: "web"}}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.rt)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if session.CodeOf(err) != session.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want invalid_argument with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "abc") {
				t.Errorf("error shows an env value: %v", err)
			}
		})
	}
	err := Validate(with(func(p *session.Process) { p.HealthCheck.URL = "http://10.1.2.3/" }))
	var se *session.Error
	if !errors.Is(err, ErrNotLoopback) || !errors.As(err, &se) || !strings.HasPrefix(se.Message, `runtime process "web": `) {
		t.Errorf("remote URL error %v: want ErrNotLoopback and a *session.Error naming the process", err)
	}
}

func TestRootedAndFind(t *testing.T) {
	rt := &session.Runtime{Processes: []session.Process{
		{Name: "a", Command: []string{"x"}},
		{Name: "b", Command: []string{"x"}, Cwd: "web"},
		{Name: "c", Command: []string{"x"}, Cwd: "/srv/c"},
	}}
	got := Rooted(rt, "/ws")
	for i, want := range []string{"/ws", "/ws/web", "/srv/c"} {
		if got.Processes[i].Cwd != want {
			t.Errorf("Rooted cwd[%d] = %q, want %q", i, got.Processes[i].Cwd, want)
		}
	}
	if rt.Processes[0].Cwd != "" || rt.Processes[1].Cwd != "web" {
		t.Error("Rooted changed its input")
	}
	if Rooted(nil, "/ws") != nil {
		t.Error("Rooted(nil) != nil")
	}
	if p, ok := Find(rt, "b"); !ok || p.Cwd != "web" {
		t.Errorf("Find(b) = %+v, %v", p, ok)
	}
	if _, ok := Find(rt, "z"); ok {
		t.Error("Find(z) found something")
	}
	if _, ok := Find(nil, "a"); ok {
		t.Error("Find(nil) found something")
	}
}
