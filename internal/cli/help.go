package cli

import "fmt"

// commandHelp is the text of "cairn help CMD" and "cairn CMD --help", for
// every command.
var commandHelp = map[string]string{
	"init": `usage: cairn init [--workspace DIR]

Make DIR (default: the current directory) a cairn workspace: create its
.cairn folder. Commands run in DIR or below it then find it. Nothing
else is started; cairnd starts on first use.
`,
	"daemon": `usage: cairn daemon start|stop|status

  start   start the workspace's cairnd if it is not running (makes the
          workspace when there is none); it keeps running until stop,
          where one a command auto-starts exits after 10 idle minutes
  stop    stop the workspace's cairnd (SIGTERM) and wait for it to exit
  status  show the daemon's status; exit 3 when none is running or there
          is no workspace
`,
	"ls": `usage: cairn ls [--json]

List the workspace's sessions: id, generation, runs, messages, last update.
Exit 1 when a session is damaged (see cairn verify).
`,
	"show": `usage: cairn show ID [--messages N] [--json]

Show a session's latest generation: its counts, workspace, next step, and
the conversation tail, the last N messages (default 10; 0: none).
--json prints the whole snapshot instead.
`,
	"runs": `usage: cairn runs ID [--json]

List a session's runs, with their loop checkpoints and which were
interrupted.
`,
	"resume": `usage: cairn resume ID [--json]

Print what a new agent is handed for the session: the handoff, the
interrupted runs and the drift of the workspace since the last save.
`,
	"rm": `usage: cairn rm ID

Delete a session, its checkpoints and its workflows.
`,
	"messages": `usage: cairn messages ID [--tail N | --from A --to B]

Print the session's messages, one JSON value a line, read in pages.
--tail N: the last N; --from A --to B: those at index A up to B (B
excluded).
`,
	"artifacts": `usage: cairn artifacts ID [--json]

List the session's artifacts (id, size, media type, name) without their
data.
`,
	"handoff": `usage: cairn handoff ID [--write | --check] [--json]

Print HANDOFF.md rendered from the session's evidence.
  --write  write it to the workspace root instead
  --check  list what the handoff lacks; exit 1 if anything
`,
	"runtime": `usage: cairn runtime ID [--restart NAME [--timeout 30s]] [--json]

Show the recorded processes and previews with their live state.
--restart NAME brings one back (here, with this shell's environment)
unless it is healthy; exit 1 if it does not come up within --timeout.
`,
	"export": `usage: cairn export ID [-o FILE]

Write the session's JSON envelope to standard output, or with -o to FILE
(replaced when complete). cairnd writes it page by page as it reads.
`,
	"import": `usage: cairn import FILE

Import a session from a JSON envelope (FILE "-": standard input). Makes
the workspace when there is none.
`,
	"verify": `usage: cairn verify [--secrets] [--json]

Read and check every record of every session, workflow and manifest file;
list what is damaged and what is kept in .cairn/quarantine. Exit 1 if
anything is damaged.
  --secrets  also scan message, trace and artifact content for
             credential-shaped strings and list where they are (redacted;
             nothing is changed; exit 1 if any is found)
`,
	"repair": `usage: cairn repair ID [--yes] [--workflow]

Salvage a damaged session: print what it keeps and what it cannot, then
write it only if you answer y (or pass --yes). The original bytes are
kept in .cairn/quarantine. --workflow: ID is a workflow, not a session.
`,
	"version": `usage: cairn version [--json]

Print the versions of cairn, the protocol and, when one runs for the
workspace, cairnd.
`,
	"help": `usage: cairn help [COMMAND]

Print the help of cairn, or of one command (as cairn COMMAND --help).
`,
}

// help prints the help of cmd (cairn CMD --help).
func (e *env) help(cmd string) int {
	if cmd == "list" {
		cmd = "ls"
	}
	h, ok := commandHelp[cmd]
	if !ok {
		return e.fail(fmt.Errorf("%w: unknown command %q", errUsage, cmd))
	}
	fmt.Fprint(e.stdout, h)
	return ExitOK
}
