package main_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCLISecrets imports a session through the real daemon with secrets in
// its metadata and in its content: the metadata secrets reach no byte of
// .cairn, the content is kept, and verify --secrets lists where each
// content secret is, redacted, and exits 1 (verify alone does not scan).
func TestCLISecrets(t *testing.T) {
	const (
		msgTok  = "ghp_4Nq8Lx2Vm9Wz7Kp1Rt3Ys6Bd0Fg5Jh2Ca8Ue4O"
		dataKey = "AKIAIOSFODNN7EXAMPLE"
		metaTok = "sk-proj-4fK9pQ2xLm7Wz1Vb8Nc3Rt6Yh0Js5Dg2Ae9Ui4Ol7Pk1Mq3Xw"
		metaPW  = "plain-looking-password-value"
	)
	ws := newWorkspace(t)
	t.Cleanup(func() { cli(t, ws, "", "daemon", "stop") })
	msg := `{"role":"user","content":"token ` + msgTok + `"}`
	doc := map[string]any{"schema_version": 1, "session": map[string]any{
		"session_id": "s",
		"metadata":   map[string]any{"ticket": "T-7", "Auth-Token": metaPW, "note": "use " + metaTok},
		"messages":   []json.RawMessage{json.RawMessage(`"hi"`), json.RawMessage(msg)},
		"artifacts":  []any{map[string]any{"id": "env", "data": []byte("export AWS=" + dataKey + "\n")}},
	}}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := cli(t, ws, "", "import", file); code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}

	if out, _, code := cli(t, ws, "", "verify"); code != 0 || strings.Contains(out, "secret") {
		t.Fatalf("verify without --secrets: exit %d\n%s", code, out)
	}
	out, _, code := cli(t, ws, "", "verify", "--secrets")
	msgAt := strings.Index(msg, msgTok)
	if code != 1 || !strings.Contains(out, "s: message 1, byte "+strconv.Itoa(msgAt)+": github_token ghp_…") ||
		!strings.Contains(out, `s: artifact "env", byte 11: aws_access_key_id AKIA…`) || !strings.Contains(out, "2 secret(s) found") {
		t.Fatalf("verify --secrets: exit %d\n%s", code, out)
	}
	for _, s := range []string{msgTok, dataKey, msgTok[:6], dataKey[:6]} {
		if strings.Contains(out, s) {
			t.Fatalf("verify --secrets shows %q:\n%s", s, out)
		}
	}
	out, _, code = cli(t, ws, "", "verify", "--secrets", "--json")
	var rep struct {
		OK      bool `json:"ok"`
		Secrets struct {
			Found    int `json:"found"`
			Findings []struct {
				Where  string `json:"where"`
				Index  int    `json:"index"`
				ID     string `json:"id"`
				Offset int    `json:"offset"`
				Rule   string `json:"rule"`
			} `json:"findings"`
		} `json:"secrets"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || !rep.OK || rep.Secrets.Found != 2 ||
		rep.Secrets.Findings[0].Where != "message" || rep.Secrets.Findings[0].Offset != msgAt ||
		rep.Secrets.Findings[1].ID != "env" || rep.Secrets.Findings[1].Rule != "aws_access_key_id" {
		t.Fatalf("verify --secrets --json: exit %d, %v\n%s", code, err, out)
	}
	if _, _, code := cli(t, ws, "", "ls", "--secrets"); code != 2 {
		t.Fatalf("ls --secrets: exit %d, want 2 (usage)", code)
	}

	// The metadata secrets are in no file of .cairn; the content is.
	seen := map[string]bool{}
	err = filepath.WalkDir(filepath.Join(ws, ".cairn"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err // the socket and directories hold nothing to read
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range []string{metaTok, metaPW, msgTok, "T-7"} {
			if strings.Contains(string(b), s) {
				seen[s] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen[metaTok] || seen[metaPW] || !seen[msgTok] || !seen["T-7"] {
		t.Fatalf("in .cairn: %v; want the message token and the ticket, not the metadata secrets", seen)
	}
}
