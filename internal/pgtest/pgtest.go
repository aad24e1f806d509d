// Package pgtest starts a real PostgreSQL server for tests, from the
// machine's own binaries, in a temporary folder that it removes afterwards.
//
// The server listens on a Unix socket in its folder and on 127.0.0.1 at a
// free port, nowhere else, with fsync and synchronous_commit on, so what a
// test sees acknowledged is what a production server would keep. When the
// binaries are missing the test fails, unless CAIRN_SKIP_PG=1 says to skip on
// purpose. PostgreSQL refuses to run as root, so under root the server runs
// as the "nobody" user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// T is what a Server needs of its owner: a *testing.T or *testing.B, or a
// program's stand-in (see pgserve).
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
}

var _ T = testing.TB(nil)

// Server is a running PostgreSQL server owned by one test.
type Server struct {
	t      T
	bin    string // folder holding initdb, pg_ctl and postgres
	dir    string // the temp folder: data/ and the socket
	port   int
	cred   *syscall.Credential // nil unless running as root
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	logf   *os.File
}

// BinDir returns the folder holding initdb, pg_ctl and postgres: the one on
// PATH, else the newest /usr/lib/postgresql/*/bin (Debian's layout).
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dir = filepath.Dir(real)
		}
		if hasAll(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if hasAll(d) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or under /usr/lib/postgresql/*/bin; install Debian's postgresql package (.ci/run does)")
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasAll(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// Start initialises a database cluster in a new temp folder and starts a
// server on it; t.Cleanup stops it and removes the folder.
func Start(t T) *Server {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		if os.Getenv("CAIRN_SKIP_PG") == "1" {
			t.Skipf("CAIRN_SKIP_PG=1: skipping the PostgreSQL test: %v", err)
		}
		t.Fatalf("pgtest: %v (set CAIRN_SKIP_PG=1 to skip the PostgreSQL tests on purpose)", err)
	}
	s := &Server{t: t, bin: bin}
	// A folder of our own rather than t.TempDir: under root the server runs
	// as nobody, which must be able to reach it, and t.TempDir's parents
	// are private to root.
	s.dir, err = os.MkdirTemp("", "cairn-pg-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	if os.Geteuid() == 0 {
		s.cred, err = nobody()
		if err != nil {
			t.Fatalf("pgtest: running as root, and PostgreSQL refuses root: %v", err)
		}
		if err := os.Chmod(s.dir, 0o755); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if out, err := s.command(filepath.Join(bin, "initdb"), "-D", s.DataDir(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.logf, err = os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { s.logf.Close() })
	s.port = freePort(t)
	t.Cleanup(s.stop)
	if err := s.start(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return s
}

func nobody() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("no user nobody to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// command prepares a server binary to run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

func freePort(t T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// DataDir is the cluster's data folder.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// SocketDir is the folder holding the server's Unix socket.
func (s *Server) SocketDir() string { return s.dir }

// Port is the loopback TCP port.
func (s *Server) Port() int { return s.port }

// URL is a connection string for database postgres over loopback TCP.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// SocketURL is a connection string for database postgres over the Unix
// socket.
func (s *Server) SocketURL() string {
	return fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", s.dir, s.port)
}

// CreateDB creates a new, empty database and returns its loopback URL, so
// each test of a package can have its own database on one server.
func (s *Server) CreateDB(name string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		s.t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		s.t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return strings.Replace(s.URL(), "/postgres?", "/"+name+"?", 1)
}

// start runs the postmaster and waits until it takes connections.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lastErr error
	// A restart right after a SIGKILL can find the old backends still
	// holding shared memory for a moment; they exit once they see the
	// postmaster gone, so try again.
	for attempt := 0; attempt < 50; attempt++ {
		cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.DataDir(),
			"-k", s.dir, "-h", "127.0.0.1", "-p", strconv.Itoa(s.port),
			"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "max_connections=200",
			"-c", "shared_buffers=16MB", "-c", "logging_collector=off")
		cmd.Stdout, cmd.Stderr = s.logf, s.logf
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start postgres: %w", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := waitReady(ctx, s.URL(), exited)
		cancel()
		if err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		lastErr = err
		cmd.Process.Kill()
		<-exited
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return fmt.Errorf("postgres did not start: %v\n%s", lastErr, tail(log, 2000))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	for {
		select {
		case <-exited:
			return errors.New("postgres exited while starting")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, url)
		if err == nil {
			err = conn.Ping(cctx)
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill SIGKILLs the postmaster, as a crash or an OOM kill would, and waits
// until it and its backends are gone. Nothing is flushed or shut down.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	// Backends put themselves in sessions of their own (setsid), and
	// would go on serving a transaction for a moment after the
	// postmaster dies: kill them with it, as a host crash would.
	kids := children(s.cmd.Process.Pid)
	s.cmd.Process.Signal(syscall.SIGKILL)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-s.exited
	s.cmd = nil
}

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split
		// after its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if c, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// Restart starts the server again after Kill, on the same data and port;
// PostgreSQL runs crash recovery from its WAL.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("pgtest: restart: %v", err)
	}
}

// stop shuts the server down at once (no checkpoint: the data is thrown
// away), falling back to SIGKILL.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	kids := children(s.cmd.Process.Pid)
	stop := s.command(filepath.Join(s.bin, "pg_ctl"), "stop", "-D", s.DataDir(), "-m", "immediate", "-w", "-t", "20")
	if err := stop.Run(); err != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	s.cmd = nil
}
