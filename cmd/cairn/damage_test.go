package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestCLIDamage: with one damaged session log, ls and verify report it and
// exit 1, the damaged session is refused while the other is served, repair
// writes nothing until confirmed, and after it everything checks again.
func TestCLIDamage(t *testing.T) {
	ws := newWorkspace(t)
	st, err := fsstore.Open(ws, fsstore.Options{CompactMinBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 1; i <= 20; i++ {
		m := session.Value(fmt.Sprintf(`{"role":"user","content":"turn %d %s"}`, i, strings.Repeat("x", 2000)))
		if _, err := st.Commit(ctx, "bad", &session.Change{AppendMessages: []session.Value{m}}, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Commit(ctx, "good", &session.Change{AppendMessages: []session.Value{session.Value(`"hi"`)}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(ws, ".cairn", "sessions", "s-bad.log")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(log, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })

	out, _, code := cli(t, ws, "", "ls")
	if code != 1 || !lineHas(out, "bad", "corrupt") || !lineHas(out, "good", "ok") || !strings.Contains(out, "cairn repair bad") {
		t.Fatalf("ls with a damaged session: exit %d\n%s", code, out)
	}
	if out, _, code := cli(t, ws, "", "ls", "--json"); code != 1 || !strings.Contains(out, `"state": "corrupt"`) {
		t.Fatalf("ls --json: exit %d\n%s", code, out)
	}
	if _, errs, code := cli(t, ws, "", "show", "bad"); code != 1 || !strings.Contains(errs, "is damaged") {
		t.Fatalf("show of the damaged session: exit %d %q", code, errs)
	}
	if _, _, code := cli(t, ws, "", "show", "good"); code != 0 {
		t.Fatalf("show of the healthy session: exit %d", code)
	}
	out, _, code = cli(t, ws, "", "verify")
	if code != 1 || !strings.Contains(out, "session bad: corrupt") || !strings.Contains(out, "cairn repair bad") || !strings.Contains(out, "1 problem(s) found") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}

	out, _, code = cli(t, ws, "", "repair", "bad")
	if code != 1 || !strings.Contains(out, "keeps: the session as of generation") || !strings.Contains(out, "nothing written") {
		t.Fatalf("unconfirmed repair: exit %d\n%s", code, out)
	}
	if now, _ := os.ReadFile(log); !bytes.Equal(now, data) {
		t.Fatal("an unconfirmed repair wrote to the log")
	}
	out, _, code = cli(t, ws, "y\n", "repair", "bad")
	if code != 0 || !strings.Contains(out, "repaired session bad") {
		t.Fatalf("confirmed repair: exit %d\n%s", code, out)
	}
	if out, _, code := cli(t, ws, "", "ls"); code != 0 || !lineHas(out, "bad", "ok") {
		t.Fatalf("ls after repair: exit %d\n%s", code, out)
	}
	out, _, code = cli(t, ws, "", "verify")
	if code != 0 || !strings.Contains(out, "no damage found") || !strings.Contains(out, "s-bad.log.") {
		t.Fatalf("verify after repair: exit %d\n%s", code, out)
	}
	if _, errs, code := cli(t, ws, "", "repair", "bad", "--yes"); code != 1 || !strings.Contains(errs, "not damaged") {
		t.Fatalf("repair of a healthy session: exit %d %q", code, errs)
	}
}

// lineHas reports whether some line of out holds every word, in order.
func lineHas(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, w := range words {
			i := strings.Index(rest, w)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(w):]
		}
		if ok {
			return true
		}
	}
	return false
}
