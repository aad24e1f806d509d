package procs

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childArg as the first argument makes the test binary act as one of the
// small programs the tests record as runtime processes (see runChild).
const childArg = "cairn-runtime-child"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(runChild(os.Args[2:]))
	}
	flag.Parse()
	// Children are this binary; under -race each would sleep a second at
	// a clean exit (the race runtime's default), slowing every health
	// command. GORACE is read at startup, so this affects children only.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	goleak.VerifyTestMain(m)
}

// childLife bounds every child program, so nothing a failed test leaves
// behind runs for long.
const childLife = 2 * time.Minute

// runChild runs a child program:
//
//	serve ADDR [--status N] [--need-env KEY] [--spawn PIDFILE] [--ignore-term]
//	    an HTTP server on ADDR; GET /healthz answers N (200), or 500 when
//	    KEY is unset in its environment (it never prints the value);
//	    --spawn starts a "sleep" grandchild in its process group and writes
//	    its pid to PIDFILE; --ignore-term ignores SIGTERM.
//	sleep      sleeps (a grandchild, or a health command that hangs)
//	exit N     exits with status N at once
//	check FILE exits 0 when FILE exists (relative to the cwd), else 3
func runChild(args []string) int {
	if len(args) == 0 {
		return 2
	}
	go func() { time.Sleep(childLife); os.Exit(4) }()
	switch args[0] {
	case "sleep":
		time.Sleep(childLife)
		return 0
	case "exit":
		n, _ := strconv.Atoi(args[1])
		fmt.Println("exiting with", n)
		return n
	case "check":
		if _, err := os.Stat(args[1]); err != nil {
			return 3
		}
		return 0
	case "serve":
		return serve(args[1:])
	}
	return 2
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	status := fs.Int("status", http.StatusOK, "")
	needEnv := fs.String("need-env", "", "")
	spawn := fs.String("spawn", "", "")
	ignoreTerm := fs.Bool("ignore-term", false, "")
	if len(args) < 1 || fs.Parse(args[1:]) != nil {
		return 2
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *spawn != "" {
		exe, _ := os.Executable()
		c := exec.Command(exe, childArg, "sleep")
		if err := c.Start(); err != nil {
			fmt.Println("spawn:", err)
			return 1
		}
		if err := os.WriteFile(*spawn, []byte(strconv.Itoa(c.Process.Pid)), 0o600); err != nil {
			return 1
		}
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	fmt.Println("listening on", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if *needEnv != "" && os.Getenv(*needEnv) == "" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(*status)
	})
	err = http.Serve(ln, mux)
	if errors.Is(err, net.ErrClosed) {
		return 0
	}
	return 1
}
