// Package cli is the cairn command line: argument parsing, the commands
// and their human and JSON output. cmd/cairn only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

// Exit statuses of Main.
const (
	ExitOK       = 0
	ExitFailure  = 1 // anything else that went wrong
	ExitUsage    = 2 // bad command line
	ExitNotFound = 3 // no such session (or no daemon, for "daemon status")
)

// Usage is the text of cairn --help.
const Usage = `usage: cairn [flags] <command> [args]
       cairn help <command>, cairn <command> --help: the command's help

cairn reads and manages the agent sessions cairn keeps for a workspace. It
talks to the workspace's daemon (cairnd) and starts one when none is running
(cairnd is found through $CAIRN_DAEMON, next to this executable, or on PATH).

The workspace is found as git finds a repository: the nearest folder at or
above the current directory that holds .cairn/, else the nearest repository
root (.git), else the current directory. Where none holds .cairn/, the
commands that read say so and create nothing (exit 3); init, import and
daemon start make the workspace.

commands:
  init             make the current directory (or --workspace) a workspace
  daemon start     start the workspace's cairnd if it is not running; one
                   started this way keeps running until "daemon stop"
                   (one a command auto-starts exits after 10 idle minutes)
  daemon stop      stop the workspace's cairnd (SIGTERM) and wait for it to exit
  daemon status    show the daemon's status (exit 3 when none is running)
  ls               list the sessions
  show ID          show a session's latest generation and its last 10
                   messages (--messages N: the last N)
  runs ID          list a session's runs, with their loop checkpoints
  resume ID        what a new agent is handed: handoff, interrupted runs, drift
  rm ID            delete a session, its checkpoints and its workflows
  messages ID      print the session's messages, one JSON value a line,
                   read in pages; --tail N: the last N; --from A --to B:
                   those at index A up to B (B excluded)
  artifacts ID     list the session's artifacts without their data
  handoff ID       print HANDOFF.md rendered from the session's evidence
                   --write: write it to the workspace root instead
                   --check: list what the handoff lacks; exit 1 if anything
  runtime ID       the recorded processes and previews, with their live state
                   --restart NAME: bring one back (here, with this shell's
                   environment) unless it is healthy; exit 1 if it does not
                   come up within --timeout (default 30s)
  export ID        write the session's JSON envelope to standard output
                   -o FILE: write it to FILE instead (replaced when complete);
                   either way cairnd writes it page by page as it reads
  import FILE      import a session from a JSON envelope (FILE "-": stdin)
  verify           read and check every record of every session, workflow
                   and manifest file; list what is damaged and what is kept
                   in .cairn/quarantine (exit 1 if anything is damaged)
                   --secrets: also scan message, trace and artifact content
                   for credential-shaped strings and list where they are
                   (redacted; nothing is changed; exit 1 if any is found)
  repair ID        salvage a damaged session: print what it keeps and what
                   it cannot, then write it only if you answer y (or pass
                   --yes); the original bytes are kept in .cairn/quarantine
                   --workflow: ID is a workflow, not a session
  version          print the versions of cairn, cairnd and the protocol
  help [COMMAND]   print this help, or the help of COMMAND

flags (anywhere on the line):
  --workspace DIR  the workspace (default: found from the current directory)
  --json           print JSON for machines instead of text for people; an
                   error is then the object {"code": ..., "message": ...}
                   on standard output, with the same exit status
  --log-level L    debug, info, warn or error (default info); debug adds
                   the error whole, with the operations it passed through
  --socket PATH    talk to the daemon at this socket; never start one
  -h, --help       print this help

exit status:
  0  success
  1  failure (daemon unreachable, I/O error, conflict, invalid input,
     an incomplete handoff under --check, a restart that failed, a
     damaged session or file found by ls or verify, a secret found by
     verify --secrets, a repair not
     confirmed, ...)
  2  usage error (unknown command, missing or extra argument, bad flag)
  3  not found (no such session; no workspace: no .cairn/ found for a
     command that reads; "daemon status": no daemon running)

Errors are said in plain words on standard error. --json error codes are
the protocol's (not_found, conflict, invalid_argument, corrupt, locked,
unavailable, ...) and usage, no_workspace, not_running.
`

// errUsage marks a command line error.
var errUsage = errors.New("usage")

// errNoDaemonRunning is returned by "daemon status" when no daemon answers.
var errNoDaemonRunning = errors.New("cairnd is not running")

// env is what a command runs with.
type env struct {
	ctx       context.Context
	workspace string
	socket    string
	json      bool
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer

	// Flags of handoff and runtime.
	write   bool
	check   bool
	restart string
	timeout time.Duration

	// Flags of messages: the range (-1: not given).
	tail, from, to int64

	// Flag of export.
	output string

	// Flags of repair.
	yes, workflow bool

	// Flag of verify.
	secrets bool

	// Flag of show: how many of the last messages it prints (-1: default).
	showMessages int64

	// debug (--log-level debug) prints errors whole, with their internals.
	debug bool

	// noWorkspace: version found no workspace, so no daemon to ask.
	noWorkspace bool
}

// Main runs the command line args (without the program name) and returns
// the exit status.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, tail: -1, from: -1, to: -1, showMessages: -1}
	pos, help, err := e.parse(args)
	if err != nil {
		if e.json || slices.Contains(args, "--json") {
			e.json = true
			return e.fail(fmt.Errorf("%w: %w", errUsage, err))
		}
		fmt.Fprintf(stderr, "cairn: %v\n\n%s", err, Usage)
		return ExitUsage
	}
	if help || len(pos) == 0 {
		if len(pos) == 0 && !help {
			fmt.Fprint(stderr, Usage)
			return ExitUsage
		}
		if len(pos) > 0 {
			return e.help(pos[0])
		}
		fmt.Fprint(stdout, Usage)
		return ExitOK
	}
	return e.fail(e.run(pos))
}

// parse separates flags (allowed anywhere) from positional arguments.
func (e *env) parse(args []string) (pos []string, help bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		// value is the flag's value: after "=", else the next argument.
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch name {
		case "h", "help":
			help = true
		case "log-level":
			if val, err = value(); err != nil {
				return nil, false, err
			}
			switch val {
			case "debug", "info", "warn", "error":
				e.debug = val == "debug"
			default:
				return nil, false, fmt.Errorf("flag --log-level: %q is not debug, info, warn or error", val)
			}
		case "json":
			e.json = true
			if hasVal {
				e.json = val == "true" || val == "1"
			}
		case "write", "check", "yes", "y", "workflow", "secrets":
			on := !hasVal || val == "true" || val == "1"
			switch name {
			case "secrets":
				e.secrets = on
			case "write":
				e.write = on
			case "check":
				e.check = on
			case "workflow":
				e.workflow = on
			default:
				e.yes = on
			}
		case "restart", "timeout":
			if val, err = value(); err != nil {
				return nil, false, err
			}
			if name == "restart" {
				e.restart = val
			} else {
				d, err := time.ParseDuration(val)
				if err != nil || d < 0 {
					return nil, false, fmt.Errorf("flag --timeout: %q is not a duration such as 30s", val)
				}
				e.timeout = d
			}
		case "tail", "from", "to", "messages":
			if val, err = value(); err != nil {
				return nil, false, err
			}
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return nil, false, fmt.Errorf("flag --%s: %q is not a message count or index", name, val)
			}
			switch name {
			case "messages":
				e.showMessages = n
			case "tail":
				e.tail = n
			case "from":
				e.from = n
			default:
				e.to = n
			}
		case "o", "output":
			if val, err = value(); err != nil {
				return nil, false, err
			}
			if val == "" {
				return nil, false, fmt.Errorf("flag -%s needs a file name", name)
			}
			e.output = val
		case "workspace", "socket":
			if val, err = value(); err != nil {
				return nil, false, err
			}
			if name == "workspace" {
				e.workspace = val
			} else {
				e.socket = val
			}
		default:
			return nil, false, fmt.Errorf("unknown flag %s", a)
		}
	}
	return pos, help, nil
}

// run dispatches a command.
func (e *env) run(pos []string) error {
	cmd, args := pos[0], pos[1:]
	want := func(n int, what string) error {
		if len(args) != n {
			if what == "" {
				return fmt.Errorf("%w: %s takes no arguments", errUsage, cmd)
			}
			return fmt.Errorf("%w: %s takes %s", errUsage, cmd, what)
		}
		return nil
	}
	if (e.write || e.check) && cmd != "handoff" {
		return fmt.Errorf("%w: --write and --check go with handoff", errUsage)
	}
	if e.restart != "" && cmd != "runtime" {
		return fmt.Errorf("%w: --restart goes with runtime", errUsage)
	}
	if (e.tail >= 0 || e.from >= 0 || e.to >= 0) && cmd != "messages" {
		return fmt.Errorf("%w: --tail, --from and --to go with messages", errUsage)
	}
	if e.tail >= 0 && (e.from >= 0 || e.to >= 0) {
		return fmt.Errorf("%w: give --tail or --from/--to, not both", errUsage)
	}
	if e.output != "" && cmd != "export" {
		return fmt.Errorf("%w: -o goes with export", errUsage)
	}
	if (e.yes || e.workflow) && cmd != "repair" {
		return fmt.Errorf("%w: --yes and --workflow go with repair", errUsage)
	}
	if e.secrets && cmd != "verify" {
		return fmt.Errorf("%w: --secrets goes with verify", errUsage)
	}
	if e.showMessages >= 0 && cmd != "show" {
		return fmt.Errorf("%w: --messages goes with show", errUsage)
	}
	switch cmd {
	case "help":
		if len(args) > 1 {
			return fmt.Errorf("%w: help takes at most one command", errUsage)
		}
		if len(args) == 1 {
			h, ok := commandHelp[args[0]]
			if args[0] == "list" {
				h, ok = commandHelp["ls"], true
			}
			if !ok {
				return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
			}
			fmt.Fprint(e.stdout, h)
			return nil
		}
		fmt.Fprint(e.stdout, Usage)
		return nil
	case "init":
		if err := want(0, ""); err != nil {
			return err
		}
		ws, err := protocol.Workspace(e.workspace)
		if err != nil {
			return &dirError{what: "workspace " + e.workspace, err: err}
		}
		e.workspace = ws
		return e.initCmd()
	}
	if _, ok := commandHelp[cmd]; !ok && cmd != "list" {
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	if err := e.resolveWorkspace(creates(pos)); err != nil {
		// version reports what it can without a workspace.
		if cmd != "version" || !errors.Is(err, errNoWorkspace) {
			return err
		}
		e.noWorkspace = true
	}
	switch cmd {
	case "messages", "artifacts":
		if err := want(1, "one session ID"); err != nil {
			return err
		}
		if cmd == "messages" {
			return e.messages(args[0])
		}
		return e.artifacts(args[0])
	case "handoff", "runtime":
		if err := want(1, "one session ID"); err != nil {
			return err
		}
		if cmd == "handoff" {
			return e.handoffCmd(args[0])
		}
		return e.runtimeCmd(args[0])
	case "daemon":
		if len(args) != 1 {
			return fmt.Errorf("%w: daemon takes start, stop or status", errUsage)
		}
		switch args[0] {
		case "start":
			return e.daemonStart()
		case "stop":
			return e.daemonStop()
		case "status":
			return e.daemonStatus()
		}
		return fmt.Errorf("%w: unknown daemon command %q (start, stop or status)", errUsage, args[0])
	case "ls", "list":
		if err := want(0, ""); err != nil {
			return err
		}
		return e.ls()
	case "show", "runs", "resume", "rm", "export":
		if err := want(1, "one session ID"); err != nil {
			return err
		}
		switch cmd {
		case "show":
			return e.show(args[0])
		case "runs":
			return e.runs(args[0])
		case "resume":
			return e.resume(args[0])
		case "rm":
			return e.rm(args[0])
		default:
			return e.export(args[0])
		}
	case "import":
		if err := want(1, "one FILE (or - for standard input)"); err != nil {
			return err
		}
		return e.importFile(args[0])
	case "version":
		if err := want(0, ""); err != nil {
			return err
		}
		return e.version()
	case "verify":
		if err := want(0, ""); err != nil {
			return err
		}
		return e.verify()
	case "repair":
		if err := want(1, "one session ID (or, with --workflow, one workflow ID)"); err != nil {
			return err
		}
		return e.repair(args[0])
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
}

// connect returns a client for the workspace, starting cairnd if needed
// (unless --socket was given). A daemon that runs but does not take the
// connection fails it after answerWait (protocol.NoAnswerError).
func (e *env) connect(daemonArgs ...string) (*protocol.Client, error) {
	opts := &protocol.Options{ClientName: "cairn-cli", DaemonArgs: daemonArgs, HandshakeTimeout: answerWait}
	if e.socket != "" {
		return protocol.Dial(e.ctx, e.socket, opts)
	}
	return protocol.Connect(e.ctx, e.workspace, opts)
}

// dialExisting returns a client for a running daemon, without starting
// one; errNoDaemonRunning when none answers.
func (e *env) dialExisting() (*protocol.Client, error) {
	sock := e.socket
	if sock == "" {
		ws, err := protocol.Workspace(e.workspace)
		if err != nil {
			return nil, err
		}
		if sock, err = protocol.SocketPath(ws); err != nil {
			return nil, err
		}
	}
	c, err := protocol.Dial(e.ctx, sock, &protocol.Options{ClientName: "cairn-cli", HandshakeTimeout: answerWait})
	if errors.Is(err, protocol.ErrNoDaemon) {
		return nil, fmt.Errorf("%w (no daemon at %s)", errNoDaemonRunning, sock)
	}
	if e.socket == "" {
		ws, _ := protocol.Workspace(e.workspace)
		err = withHolder(err, ws)
	}
	return c, err
}

// Run is Main for the process: it uses os.Args, the standard streams and
// cancels on SIGINT.
func Run(ctx context.Context) int {
	return Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
