package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/proc"
	"github.com/cairn-dev/cairn/internal/version"
	"github.com/cairn-dev/cairn/protocol"
)

// printJSON writes v as indented JSON.
func (e *env) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	_, err = e.stdout.Write(b)
	return err
}

func (e *env) daemonStart() error {
	// Started on purpose: it stays, where an auto-started one would exit
	// when idle.
	c, err := e.connect("--idle-timeout=0")
	if err != nil {
		return err
	}
	defer c.Close()
	h := c.Hello()
	if e.json {
		return e.printJSON(map[string]any{"pid": h.PID, "socket": c.Socket(), "workspace": h.Workspace, "version": h.ServerVersion})
	}
	fmt.Fprintf(e.stdout, "cairnd %s running (pid %d) for %s\nsocket %s\n", h.ServerVersion, h.PID, h.Workspace, c.Socket())
	return nil
}

// stopWait bounds how long "daemon stop" waits for the daemon to exit.
const stopWait = 15 * time.Second

func (e *env) daemonStop() error {
	c, err := e.dialExisting()
	if errors.Is(err, errNoDaemonRunning) {
		if e.json {
			return e.printJSON(map[string]any{"stopped": false, "running": false})
		}
		fmt.Fprintln(e.stdout, "cairnd is not running")
		return nil
	}
	var pid int
	var na *protocol.NoAnswerError
	switch {
	case errors.As(err, &na) && na.PID > 0:
		// A daemon that does not answer is still the lock's holder (a
		// cairnd): it is stopped with a signal all the same.
		pid = na.PID
	case err != nil:
		return err
	default:
		pid = c.Hello().PID
		c.Close()
	}
	if pid <= 0 {
		return fmt.Errorf("daemon stop: the daemon did not report its pid")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("daemon stop: signal pid %d: %w", pid, err)
	}
	if na != nil {
		// A stopped process acts on the SIGTERM once continued.
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	deadline := time.Now().Add(stopWait)
	for !proc.Gone(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon stop: cairnd pid %d still running %v after SIGTERM (`kill -KILL %d` ends it; every acknowledged commit is on disk)", pid, stopWait, pid)
		}
		select {
		case <-e.ctx.Done():
			return e.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if e.json {
		return e.printJSON(map[string]any{"stopped": true, "pid": pid, "answered": na == nil})
	}
	if na != nil {
		fmt.Fprintf(e.stdout, "cairnd (pid %d) did not answer within %v; stopped it with SIGTERM\n", pid, na.After)
		return nil
	}
	fmt.Fprintf(e.stdout, "cairnd (pid %d) stopped\n", pid)
	return nil
}

func (e *env) daemonStatus() error {
	c, err := e.dialExisting()
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.Status(e.ctx)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(st)
	}
	fmt.Fprintf(e.stdout, "cairnd %s (protocol %d) %s\n", st.ServerVersion, st.ProtocolVersion, st.State)
	fmt.Fprintf(e.stdout, "pid          %d\nworkspace    %s\nsocket       %s\nstarted      %s (up %s)\n",
		st.PID, st.Workspace, st.Socket, st.StartedAt.Local().Format(time.RFC3339), (time.Duration(st.UptimeMS) * time.Millisecond).String())
	fmt.Fprintf(e.stdout, "connections  %d (subscribed %d)\nrequests     %d (in flight %d)\n", st.Connections, st.Subscribers, st.Requests, st.InFlight)
	if st.EventsDropped > 0 {
		fmt.Fprintf(e.stdout, "events dropped %d\n", st.EventsDropped)
	}
	return nil
}

func (e *env) ls() error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := c.List(e.ctx)
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(map[string]any{"sessions": nonNil(list)}); err != nil {
			return err
		}
	} else {
		renderList(e.stdout, list)
	}
	for _, s := range list {
		if s.State != "" {
			return errDamageFound
		}
	}
	return nil
}

// resumed runs fn with the session's resume result, as a new agent would
// be handed it.
func (e *env) resumed(id string, fn func(r *api.ResumeSessionResult) error) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.ResumeSession(e.ctx, id)
	if err != nil {
		return err
	}
	return fn(r)
}

func (e *env) show(id string) error {
	return e.resumed(id, func(r *api.ResumeSessionResult) error {
		if e.json {
			return e.printJSON(r.Snapshot)
		}
		renderShow(e.stdout, r)
		n := e.showMessages
		if n < 0 {
			n = defaultShowMessages
		}
		renderTail(e.stdout, r.Snapshot.Messages, n)
		return nil
	})
}

func (e *env) runs(id string) error {
	return e.resumed(id, func(r *api.ResumeSessionResult) error {
		if e.json {
			return e.printJSON(map[string]any{"session_id": id, "runs": nonNil(r.Snapshot.Runs), "interrupted_runs": nonNil(r.InterruptedRuns)})
		}
		renderRuns(e.stdout, r)
		return nil
	})
}

func (e *env) resume(id string) error {
	return e.resumed(id, func(r *api.ResumeSessionResult) error {
		if e.json {
			return e.printJSON(r)
		}
		renderResume(e.stdout, r)
		return nil
	})
}

func (e *env) rm(id string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Delete(e.ctx, id); err != nil {
		return err
	}
	if e.json {
		return e.printJSON(map[string]any{"deleted": id})
	}
	fmt.Fprintf(e.stdout, "deleted %s\n", id)
	return nil
}

// export has cairnd write the envelope (exportFile), which it does page by
// page whatever the session's size: to -o FILE, or to a private temp file
// that is then copied to standard output and removed. The envelope is JSON
// already, for --json and without it alike.
func (e *env) export(id string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	if e.output != "" {
		path, err := filepath.Abs(e.output)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		r, err := c.ExportFile(e.ctx, id, path)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(r)
		}
		fmt.Fprintf(e.stdout, "exported %s at generation %d to %s (%d bytes)\n", id, r.Generation, r.Path, r.Bytes)
		return nil
	}
	dir, err := os.MkdirTemp("", "cairn-export-")
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(dir)
	r, err := c.ExportFile(e.ctx, id, filepath.Join(dir, "envelope.json"))
	if err != nil {
		return err
	}
	f, err := os.Open(r.Path)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(e.stdout, f); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	_, err = io.WriteString(e.stdout, "\n")
	return err
}

// importFile has cairnd read the file (importFile, by its absolute path);
// standard input ("-") is sent whole (import).
func (e *env) importFile(path string) error {
	var doc []byte
	if path == "-" {
		var err error
		if doc, err = io.ReadAll(e.stdin); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	} else {
		abs, err := filepath.Abs(path)
		if err == nil {
			_, err = os.Stat(abs) // a missing file is the caller's error, not a missing session
		}
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		path = abs
	}
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	var r api.ImportResult
	if doc != nil {
		r, err = c.Import(e.ctx, doc)
	} else {
		r, err = c.ImportFile(e.ctx, path)
	}
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(r)
	}
	fmt.Fprintf(e.stdout, "imported %s at generation %d\n", r.SessionID, r.Generation)
	return nil
}

func (e *env) version() error {
	out := map[string]any{"cairn": version.Version, "protocol": api.ProtocolVersion}
	if e.noWorkspace {
		out["workspace"] = nil
	} else if c, err := e.dialExisting(); err == nil {
		out["cairnd"] = c.Hello().ServerVersion
		out["cairnd_pid"] = c.Hello().PID
		c.Close()
	}
	if e.json {
		return e.printJSON(out)
	}
	fmt.Fprintf(e.stdout, "cairn %s (protocol %d)\n", version.Version, api.ProtocolVersion)
	if v, ok := out["cairnd"]; ok {
		fmt.Fprintf(e.stdout, "cairnd %s (pid %d)\n", v, out["cairnd_pid"])
	} else {
		fmt.Fprintln(e.stdout, "cairnd not running")
	}
	return nil
}

// nonNil returns s, or an empty slice for nil (so JSON shows []).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// maxPages bounds how many pages "messages" reads, so a session that grows
// faster than it is read cannot keep the command going.
const maxPages = 1 << 20

// messages prints the session's messages in the range of --tail or
// --from/--to, one compact JSON value a line, reading page after page so
// that no answer passes the daemon's message size limit.
func (e *env) messages(id string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	req := api.MessagesRequest{SessionID: id}
	switch {
	case e.tail >= 0:
		if e.tail == 0 {
			return nil
		}
		req.Tail = e.tail
	default:
		req.From, req.To = max(e.from, 0), max(e.to, 0)
		if e.to == 0 {
			return nil // [from, 0) is empty, not "to the end"
		}
	}
	w := bufio.NewWriter(e.stdout)
	var line bytes.Buffer
	for range maxPages {
		p, err := c.Messages(e.ctx, req)
		if err != nil {
			return err
		}
		for _, m := range p.Messages {
			line.Reset()
			if err := json.Compact(&line, m); err != nil {
				return fmt.Errorf("message %s: %w", id, err)
			}
			line.WriteByte('\n')
			if _, err := w.Write(line.Bytes()); err != nil {
				return err
			}
		}
		if !p.More {
			return w.Flush()
		}
		// The rest of the range, by index: a tail's end is where the
		// session ended when it was first read.
		if req.Tail > 0 {
			req.Tail, req.To = 0, p.Total
		}
		req.From = p.Next
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return fmt.Errorf("messages of %s: still more after %d pages", id, maxPages)
}

// artifacts lists the session's artifacts: id, size, media type and name
// (or path), or the listing as JSON.
func (e *env) artifacts(id string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Artifacts(e.ctx, id)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(r)
	}
	if len(r.Artifacts) == 0 {
		fmt.Fprintf(e.stdout, "%s has no artifacts\n", id)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSIZE\tTYPE\tNAME")
	for _, a := range r.Artifacts {
		name := a.Name
		if name == "" {
			name = a.Path
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", a.ID, a.Size, orDash(a.MediaType), orDash(name))
	}
	return tw.Flush()
}
