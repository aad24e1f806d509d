package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-dev/cairn/session"
)

// errDamageFound makes ls and verify exit 1 after they have printed what
// is damaged.
var errDamageFound = errors.New("damage found")

func (e *env) verify() error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := c.Verify(e.ctx, session.VerifyRequest{Secrets: e.secrets})
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(rep); err != nil {
			return err
		}
	} else {
		w := e.stdout
		fmt.Fprintf(w, "checked %d session log(s), %d workflow log(s), %d manifest file(s): %d bytes\n", rep.Sessions, rep.Workflows, rep.Manifests, rep.Bytes)
		for _, p := range rep.Problems {
			if strings.HasPrefix(p.Path, "postgres:") {
				// A PostgreSQL store's rows: repair is the file store's;
				// PostgreSQL's own tools restore a database.
				fmt.Fprintf(w, "\n%s %s: %s (session at generation %d)\n  %s\n  %s\n", p.Kind, p.ID, p.State, p.Generation, p.Path, p.Message)
				continue
			}
			at := "where the damage starts is unknown"
			if p.Offset >= 0 {
				at = fmt.Sprintf("intact up to byte %d of %d", p.Offset, p.Size)
			}
			fmt.Fprintf(w, "\n%s %s: %s (%s; last intact generation %d)\n  %s\n  %s\n", p.Kind, p.ID, p.State, at, p.Generation, p.Path, p.Message)
			if p.State == "corrupt" && (p.Kind == "session" || p.Kind == "workflow") {
				flag := ""
				if p.Kind == "workflow" {
					flag = " --workflow"
				}
				fmt.Fprintf(w, "  to salvage what is intact: cairn repair%s %s\n", flag, p.ID)
			}
		}
		if len(rep.Quarantine) > 0 {
			fmt.Fprintf(w, "\nkept in quarantine (never read; remove when no longer needed):\n")
			for _, q := range rep.Quarantine {
				fmt.Fprintf(w, "  %s\n", q)
			}
		}
		if rep.OK {
			fmt.Fprintln(w, "\nno damage found")
		} else {
			fmt.Fprintf(w, "\n%d problem(s) found\n", len(rep.Problems))
		}
		if rep.Secrets != nil {
			renderSecrets(w, rep.Secrets)
		}
	}
	if !rep.OK {
		return errDamageFound
	}
	if rep.Secrets != nil && rep.Secrets.Found > 0 {
		return errDamageFound
	}
	return nil
}

func renderSecrets(w io.Writer, s *session.SecretScan) {
	fmt.Fprintf(w, "\nscanned %d session(s) for secrets: %d message(s), %d trace(s), %d artifact(s), %d bytes\n", s.Sessions, s.Messages, s.Traces, s.Artifacts, s.Bytes)
	for _, f := range s.Findings {
		at := f.Where
		switch f.Where {
		case "message", "trace":
			at = fmt.Sprintf("%s %d", f.Where, f.Index)
		case "artifact", "artifact_metadata":
			at = fmt.Sprintf("%s %q", strings.ReplaceAll(f.Where, "_", " "), f.ID)
		case "agent", "metadata":
			at = fmt.Sprintf("%s key %q", f.Where, f.ID)
		}
		fmt.Fprintf(w, "  %s: %s, byte %d: %s %s\n", f.SessionID, at, f.Offset, f.Rule, f.Redacted)
	}
	if n := s.Found - int64(len(s.Findings)); n > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", n)
	}
	if s.Found == 0 {
		fmt.Fprintln(w, "no secrets found")
	} else {
		fmt.Fprintf(w, "%d secret(s) found; cairn changes no content: remove them with your host, and rotate them\n", s.Found)
	}
}

func (e *env) repair(id string) error {
	c, err := e.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	req := session.RepairRequest{SessionID: id}
	if e.workflow {
		req = session.RepairRequest{WorkflowID: id}
	}
	plan, err := c.Repair(e.ctx, req)
	if err != nil {
		return err
	}
	if !e.json {
		renderRepair(e, &plan)
	}
	if !e.yes {
		if e.json {
			return e.printJSON(plan)
		}
		fmt.Fprint(e.stdout, "Write this repair? [y/N] ")
		line, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(e.stdout, "\nnothing written")
			return fmt.Errorf("repair not confirmed: answer y, or pass --yes")
		}
	}
	req.Apply = true
	done, err := c.Repair(e.ctx, req)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(done)
	}
	fmt.Fprintf(e.stdout, "repaired %s %s; the original bytes are kept at %s\n", done.Kind, done.ID, done.Quarantine)
	return nil
}

func renderRepair(e *env, p *session.RepairReport) {
	w := e.stdout
	fmt.Fprintf(w, "%s %s (%s), %s\n", p.Kind, p.ID, p.State, p.Path)
	switch {
	case p.Generation == 0:
		fmt.Fprintf(w, "keeps: nothing (%d bytes cannot be kept)\n", p.LostBytes)
	case p.Kind == "workflow":
		fmt.Fprintf(w, "keeps: %d commit(s), %d bytes; steps done: %s\n", p.Generation, p.KeptBytes, strings.Join(p.Steps, ", "))
	default:
		fmt.Fprintf(w, "keeps: the session as of generation %d, %d bytes\n", p.Generation, p.KeptBytes)
	}
	if len(p.Lost) > 0 {
		fmt.Fprintln(w, "cannot keep:")
		for _, l := range p.Lost {
			fmt.Fprintf(w, "  - %s\n", l)
		}
	}
	fmt.Fprintf(w, "the original log is kept, byte for byte, in %s\n", p.Quarantine)
}
