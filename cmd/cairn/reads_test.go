package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestCLIMessagesAndArtifacts: "cairn messages" prints one JSON value a
// line for the range asked, "cairn artifacts" lists without data.
func TestCLIMessagesAndArtifacts(t *testing.T) {
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })
	var ms []string
	for i := range 12 {
		// Whitespace inside a value must not break the one-a-line output.
		ms = append(ms, fmt.Sprintf("{ \"n\": %d,\n \"role\": \"user\" }", i))
	}
	env := fmt.Sprintf(`{"schema_version":1,"session_id":"s1","messages":[%s],
		"artifacts":[{"id":"a1","name":"notes.txt","media_type":"text/plain","data":"aGVsbG8="},{"id":"a2","path":"docs/x.md","size":9}]}`,
		strings.Join(ms, ","))
	f := filepath.Join(t.TempDir(), "s1.json")
	if err := os.WriteFile(f, []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cli(t, ws, "", "import", f); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "{\"n\":%d,\"role\":\"user\"}\n", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"messages", "s1"}, lines(0, 12)},
		{[]string{"messages", "s1", "--tail", "3"}, lines(9, 12)},
		{[]string{"messages", "--tail=20", "s1"}, lines(0, 12)},
		{[]string{"messages", "s1", "--from", "4", "--to", "7"}, lines(4, 7)},
		{[]string{"messages", "s1", "--from", "10"}, lines(10, 12)},
		{[]string{"messages", "s1", "--to", "2"}, lines(0, 2)},
		{[]string{"messages", "s1", "--tail", "0"}, ""},
	} {
		if out, errs, code := cli(t, ws, "", c.args...); code != 0 || out != c.want {
			t.Fatalf("%v: exit %d %q\n got %q\nwant %q", c.args, code, errs, out, c.want)
		}
	}
	out, _, code := cli(t, ws, "", "artifacts", "s1")
	if code != 0 || !strings.Contains(out, "a1") || !strings.Contains(out, "notes.txt") || !strings.Contains(out, "docs/x.md") {
		t.Fatalf("artifacts: %d %q", code, out)
	}
	out, _, code = cli(t, ws, "", "artifacts", "s1", "--json")
	if code != 0 || !strings.Contains(out, `"size": 5`) || strings.Contains(out, `"data"`) {
		t.Fatalf("artifacts --json: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"messages"}, {"messages", "s1", "--tail", "2", "--from", "1"}, {"messages", "s1", "--tail", "-1"},
		{"show", "s1", "--tail", "2"}, {"artifacts"},
	} {
		if _, _, code := cli(t, ws, "", args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
	for _, args := range [][]string{{"messages", "nope"}, {"artifacts", "nope"}} {
		if _, errs, code := cli(t, ws, "", args...); code != 3 {
			t.Fatalf("%v: exit %d %q, want 3", args, code, errs)
		}
	}
	if _, _, code := cli(t, ws, "", "messages", "s1", "--from", "5", "--to", "2"); code != 1 {
		t.Fatalf("--from past --to: exit %d, want 1 (invalid_argument)", code)
	}
}

// TestCLIMessagesPaged: with a daemon whose message size limit holds a few
// messages a page, "cairn messages --tail" reads page after page and
// prints exactly the tail.
func TestCLIMessagesPaged(t *testing.T) {
	ws, err := protocol.Workspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := exec.Command(bin.cairnd, "--workspace", ws, "--max-message-size", "4096")
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Process.Kill()
		_ = d.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c *protocol.Client
	for c == nil {
		c, err = protocol.Connect(ctx, ws, &protocol.Options{NoAutoStart: true})
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("cairnd did not answer: %v", err)
			}
			c = nil
			time.Sleep(20 * time.Millisecond)
		}
	}
	defer c.Close()
	pad := strings.Repeat("p", 400)
	var want strings.Builder
	for i := range 20 {
		m := fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad)
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{session.Value(m)}}}); err != nil {
			t.Fatal(err)
		}
		if i >= 5 {
			want.WriteString(m + "\n")
		}
	}
	if p, err := c.Messages(ctx, api.MessagesRequest{SessionID: "s", Tail: 15}); err != nil || !p.More {
		t.Fatalf("a tail of 15 fits one page (%v): the test would not page", err)
	}
	if out, errs, code := cli(t, ws, "", "messages", "s", "--tail", "15"); code != 0 || out != want.String() {
		t.Fatalf("messages --tail 15: exit %d %q\n got %q\nwant %q", code, errs, out, want.String())
	}
}
