package procs

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/session"
)

// invalidError is an invalid_argument *session.Error that also unwraps to
// one of this package's sentinels, so both errors.Is(err,
// session.ErrInvalidArgument) and errors.Is(err, ErrNotLoopback) hold, and
// the wire shows the plain message.
type invalidError struct {
	se   *session.Error
	kind error
}

func (e *invalidError) Error() string   { return e.se.Error() }
func (e *invalidError) Unwrap() []error { return []error{e.se, e.kind} }

func invalid(kind error, format string, args ...any) error {
	se := &session.Error{Code: session.CodeInvalidArgument, Message: fmt.Sprintf(format, args...)}
	if kind == nil {
		return se
	}
	return &invalidError{se: se, kind: kind}
}

// withPrefix returns err with prefix added to its message, keeping its
// code and sentinels.
func withPrefix(err error, prefix string) error {
	switch e := err.(type) {
	case *invalidError:
		return &invalidError{se: &session.Error{Code: e.se.Code, Message: prefix + e.se.Message}, kind: e.kind}
	case *session.Error:
		return &session.Error{Code: e.Code, Message: prefix + e.Message}
	}
	return err
}

// ValidateURL reports whether raw is a health check URL this package will
// dial: http or https, a host that is a loopback IP (127.0.0.0/8, ::1) or
// "localhost", no credentials. A host that is not loopback gives an error
// wrapping both ErrNotLoopback and session.ErrInvalidArgument.
func ValidateURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, invalid(nil, "health check URL %q does not parse: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalid(nil, "health check URL %q: scheme %q; want http or https", raw, u.Scheme)
	}
	if u.User != nil {
		return nil, invalid(nil, "health check URL %s carries credentials; record a URL without them", u.Redacted())
	}
	if u.Host == "" {
		return nil, invalid(nil, "health check URL %q has no host", raw)
	}
	if !isLoopbackHost(u.Hostname()) {
		return nil, invalid(ErrNotLoopback, "health check URL %q: host %q is not loopback (127.0.0.0/8, ::1 or localhost); cairn does not dial it", raw, u.Hostname())
	}
	return u, nil
}

// isLoopbackHost reports whether host (no port, no brackets) is "localhost"
// or a loopback IP literal without a zone.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if strings.Contains(host, "%") {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ValidateProcess reports whether p can be probed and restarted: a name, a
// command with a program, a port in range, env_keys that are names, and at
// most one kind of health check, whose URL (if any) passes ValidateURL and
// whose expected status is an HTTP status. Errors are invalid_argument.
func ValidateProcess(p session.Process) error {
	if p.Name == "" {
		return invalid(nil, "runtime process has no name")
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return invalid(nil, "runtime process %q has no command", p.Name)
	}
	for _, k := range p.EnvKeys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return invalid(nil, "runtime process %q: env_keys holds variable names only", p.Name)
		}
	}
	return validateHealth(p)
}

// validateHealth checks what probing p needs: its health check and port.
func validateHealth(p session.Process) error {
	if p.Port < 0 || p.Port > 65535 {
		return invalid(nil, "runtime process %q: port %d is out of range", p.Name, p.Port)
	}
	hc := p.HealthCheck
	if hc == nil {
		return nil
	}
	if hc.URL != "" && len(hc.Command) > 0 {
		return invalid(nil, "runtime process %q: a health check is a command or a URL, not both", p.Name)
	}
	if len(hc.Command) > 0 && hc.Command[0] == "" {
		return invalid(nil, "runtime process %q: health check command has no program", p.Name)
	}
	if hc.URL != "" {
		if _, err := ValidateURL(hc.URL); err != nil {
			return withPrefix(err, fmt.Sprintf("runtime process %q: ", p.Name))
		}
		if hc.ExpectStatus != 0 && (hc.ExpectStatus < 100 || hc.ExpectStatus > 599) {
			return invalid(nil, "runtime process %q: expect_status %d is not an HTTP status", p.Name, hc.ExpectStatus)
		}
	}
	return nil
}

// Validate checks every process of rt with ValidateProcess, that process
// names are unique (Restart addresses them by name), and that each preview
// names a recorded process when it names one. A nil rt is valid.
func Validate(rt *session.Runtime) error {
	if rt == nil {
		return nil
	}
	seen := make(map[string]bool, len(rt.Processes))
	for _, p := range rt.Processes {
		if err := ValidateProcess(p); err != nil {
			return err
		}
		if seen[p.Name] {
			return invalid(nil, "runtime process %q is recorded twice", p.Name)
		}
		seen[p.Name] = true
	}
	for _, pv := range rt.Previews {
		if pv.URL == "" {
			return invalid(nil, "runtime preview has no url")
		}
		if pv.Process != "" && !seen[pv.Process] {
			return invalid(nil, "runtime preview %q names process %q, which is not recorded", pv.URL, pv.Process)
		}
	}
	return nil
}

// Find returns the process of rt named name.
func Find(rt *session.Runtime, name string) (session.Process, bool) {
	if rt != nil {
		for _, p := range rt.Processes {
			if p.Name == name {
				return p, true
			}
		}
	}
	return session.Process{}, false
}

// Rooted returns a copy of rt in which every process's cwd is absolute:
// an empty cwd becomes root and a relative one is joined to root (the
// workspace root, normally). rt itself is not changed.
func Rooted(rt *session.Runtime, root string) *session.Runtime {
	if rt == nil {
		return nil
	}
	out := &session.Runtime{Processes: make([]session.Process, len(rt.Processes)), Previews: rt.Previews}
	for i, p := range rt.Processes {
		switch {
		case p.Cwd == "":
			p.Cwd = root
		case !filepath.IsAbs(p.Cwd):
			p.Cwd = filepath.Join(root, p.Cwd)
		}
		out.Processes[i] = p
	}
	return out
}
