package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// Fake credentials in the well-known formats. None is real; each has the
// shape a scanner must recognise.
var secretValues = []struct{ rule, value string }{
	{"anthropic_api_key", "sk-ant-api03-Zq8hT2mVx4Lk9Pw1Rn6Ys3Bd7Fg0Jc5Hu2Ea8Oi4Tl1Mv9Nk"},
	{"openai_api_key", "sk-proj-4fK9pQ2xLm7Wz1Vb8Nc3Rt6Yh0Js5Dg2Ae9Ui4Ol7Pk1Mq3Xw"},
	{"openai_api_key", "sk-Hq3Lw9Zx1Nv7Bm4Kp2Rt8Ys6Dc0Fg5Jh3Ea9Ui1Ol7"},
	{"github_token", "ghp_4Nq8Lx2Vm9Wz7Kp1Rt3Ys6Bd0Fg5Jh2Ca8Ue4O"},
	{"github_token", "gho_Zk2Lq8Nx4Vm1Wp9Rt7Ys3Bd6Fg0Jh5Ca2Ue8Oi"},
	{"github_pat", "github_pat_11ABCDEFG0_x9Lq2Nv8Wm4Kp1Rt7Ys3Bd6Fg0Jh5Ca"},
	{"gitlab_token", "glpat-x9Lq2Nv8Wm4Kp1Rt7Ys3"},
	{"aws_access_key_id", "AKIAIOSFODNN7EXAMPLE"},
	{"aws_access_key_id", "ASIAY34FZKBOKMUTVV7A"},
	{"google_api_key", "AIzaSyD4-x9Lq2Nv8Wm4Kp1Rt7Ys3Bd6Fg0Jh5Ca"},
	{"slack_token", "xoxb-2048-4096-q8Lx2Vm9Wz7Kp1Rt3Ys6"},
	{"stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"},
	{"private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98x\n-----END RSA PRIVATE KEY-----"},
	{"private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"},
	{"jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"},
	{"url_password", "postgres://app:hunter2-Xq9@db.internal:5432/shop"},
}

// Strings that look like the above and are not credentials: they are
// kept, under keys that are not credential-named.
var lookAlikeValues = []string{
	"sk-learn", "task-4fK9pQ2xLm7Wz1Vb8Nc3Rt6Yh0Js5Dg2Ae9", "AKIAEXAMPLE", "ghp_short",
	"eyJhbGciOiJIUzI1NiJ9", "https://example.com:8443/path", "mailto:dev@example.com",
	"-----BEGIN PUBLIC KEY-----", "3f786850e387550fdab836ed7e6dc881de23001b",
	"http://localhost:3000/@scope/pkg", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ dev@host",
}

// Credential-named keys (each stored with a harmless-looking value, so
// only the key rule can drop it) and look-alike keys that are kept.
var (
	secretKeyNames = []string{
		"Auth-Token", "OPENAI_API_KEY", "github_token", "access_token", "aws_secret_access_key",
		"credentials", "authorization", "Authorization", "password", "passwd", "secret", "private_key",
		"client_secret", "session_token", "cookie", "Set-Cookie", "api_key", "apikey", "ApiKey", "api-key",
		"x-api-key", "token", "Token", "PASSWORD", "clientSecret", "refreshToken", "db.password",
		"SECRET_KEY", "ssh_key", "auth", "DB_PASSPHRASE", "slackWebhookSecret", "ANTHROPIC_API_KEY",
	}
	lookAlikeKeys = []string{
		"sort_key", "primary_key", "key", "cache-key", "max_tokens", "input_tokens", "token_count",
		"tokenizer", "eos_token", "password_policy", "secretary", "keyboard", "monkey", "author",
		"credential_helper", "cookie_domain", "passwordless", "auth_mode",
	}
)

// TestSecretKeyRules pins the key rule, both ways.
func TestSecretKeyRules(t *testing.T) {
	for _, k := range secretKeyNames {
		if !session.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false, want true", k)
		}
	}
	for _, k := range lookAlikeKeys {
		if session.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true, want false", k)
		}
	}
	for _, v := range secretValues {
		ms := session.FindSecrets([]byte("see " + v.value + " here"))
		if len(ms) != 1 || ms[0].Rule != v.rule || ms[0].Offset != 4 {
			t.Errorf("FindSecrets(%.12q…) = %+v, want one %s at 4", v.value, ms, v.rule)
		}
	}
	for _, v := range lookAlikeValues {
		if ms := session.FindSecrets([]byte(v)); len(ms) != 0 {
			t.Errorf("FindSecrets(%q) = %+v, want none", v, ms)
		}
	}
}

func jsonString(t *testing.T, s string) session.Value {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grepStore reports which of needles occur in any file under root.
func grepStore(t *testing.T, root string, needles []string) map[string]bool {
	t.Helper()
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, n := range needles {
			// A value may be stored JSON-escaped: look for both forms.
			esc, _ := json.Marshal(n)
			if bytes.Contains(b, []byte(n)) || bytes.Contains(b, esc[1:len(esc)-1]) {
				found[n] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestSecretsNeverStored saves every credential-named key and every
// credential-shaped value, at the top level and nested, into agent,
// metadata and artifact metadata through a real file store, then reads
// the store's files: no secret's bytes are in them, every look-alike's
// are, and the content (a message and an artifact's data holding the same
// secrets) is kept byte for byte.
func TestSecretsNeverStored(t *testing.T) {
	type sample struct{ name, needle string } // needle: the bytes that must not be stored
	var secrets []sample
	for i, k := range secretKeyNames {
		secrets = append(secrets, sample{"key " + k, fmt.Sprintf("kv-%02d-plain-looking-value", i)})
	}
	for _, v := range secretValues {
		secrets = append(secrets, sample{"value " + v.rule, v.value})
	}

	build := func(t *testing.T) (m map[string]session.Value, meta session.Value) {
		m = map[string]session.Value{}
		nested := map[string]any{}
		var list []any
		for i, k := range secretKeyNames {
			v := fmt.Sprintf("kv-%02d-plain-looking-value", i)
			m[k] = jsonString(t, v)
			nested[k] = v
		}
		for i, v := range secretValues {
			m[fmt.Sprintf("note_%02d", i)] = jsonString(t, v.value)
			nested[fmt.Sprintf("n%02d", i)] = map[string]any{"deep": []any{"ok", "Bearer " + v.value}}
			list = append(list, v.value, i)
		}
		for i, v := range lookAlikeValues {
			m[fmt.Sprintf("like_%02d", i)] = jsonString(t, v)
			list = append(list, v)
		}
		for _, k := range lookAlikeKeys {
			m[k] = jsonString(t, "kept-"+k)
			nested[k] = "kept-" + k
		}
		nested["list"] = list
		b, err := json.Marshal(map[string]any{"provider": nested})
		if err != nil {
			t.Fatal(err)
		}
		m["config"] = b
		return m, b
	}
	paths := []struct {
		name   string
		change func(t *testing.T) *session.Change
	}{
		{"delta", func(t *testing.T) *session.Change {
			agent, meta := build(t)
			metadata, _ := build(t)
			return &session.Change{Agent: agent, Metadata: metadata,
				AppendArtifacts: []session.Artifact{{ID: "env", Path: "env.txt", Metadata: meta}}}
		}},
		{"snapshot", func(t *testing.T) *session.Change {
			agent, meta := build(t)
			metadata, _ := build(t)
			return &session.Change{Replace: &session.Snapshot{Agent: agent, Metadata: metadata,
				Artifacts: []session.Artifact{{ID: "env", Path: "env.txt", Metadata: meta}}}}
		}},
		{"put artifact", func(t *testing.T) *session.Change {
			_, meta := build(t)
			return &session.Change{PutArtifacts: []session.Artifact{{ID: "env", Data: []byte("x"), Metadata: meta}}}
		}},
	}
	ctx := context.Background()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			root := t.TempDir() // the workspace: the store keeps .cairn in it
			st, err := fsstore.Open(root, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Commit(ctx, "s", p.change(t), session.CommitOptions{}); err != nil {
				t.Fatal(err)
			}
			head, _, err := st.Head(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			arts, err := st.Artifacts(ctx, "s", nil, false)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range head.Snapshot.Metadata {
				if !json.Valid(v) {
					t.Fatalf("metadata %q = %s is not JSON", k, v)
				}
			}
			if !json.Valid(arts.Items[0].Metadata) {
				t.Fatalf("artifact metadata %s is not JSON", arts.Items[0].Metadata)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			var needles []string
			for _, s := range secrets {
				needles = append(needles, s.needle)
			}
			for _, k := range lookAlikeKeys {
				needles = append(needles, "kept-"+k)
			}
			needles = append(needles, lookAlikeValues...)
			found := grepStore(t, root, needles)
			for _, s := range secrets {
				if found[s.needle] {
					t.Errorf("%s: %.16q… is in the store's bytes", s.name, s.needle)
				}
			}
			for _, k := range lookAlikeKeys {
				if !found["kept-"+k] {
					t.Errorf("look-alike key %q was dropped", k)
				}
			}
			for _, v := range lookAlikeValues {
				if !found[v] {
					t.Errorf("look-alike value %q was dropped", v)
				}
			}
		})
	}
}

// TestSecretsInContentKept saves the same secrets in a message, a trace
// and an artifact's data: content is never changed, so they are stored
// byte for byte, and ScanSecrets finds each where it is.
func TestSecretsInContentKept(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir() // the workspace: the store keeps .cairn in it
	st, err := fsstore.Open(root, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var all []string
	for _, s := range secretValues {
		all = append(all, s.value)
	}
	message := jsonString(t, "pasted: "+strings.Join(all, " | "))
	data := []byte("env dump\n" + strings.Join(all, "\n") + "\n")
	trace := jsonString(t, "cmd: curl -H 'Authorization: Bearer "+secretValues[3].value+"'")
	c := &session.Change{
		AppendMessages:  []session.Value{session.Value(`{"role":"user","content":"hi"}`), message},
		AppendTraces:    []session.Trace{{Seq: 1, Type: "tool"}, {Seq: 2, Type: "tool", Data: trace}},
		AppendArtifacts: []session.Artifact{{ID: "clean", Data: []byte("nothing here")}, {ID: "env", Data: data}},
	}
	if _, err := st.Commit(ctx, "s", c, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	msgs, err := st.Messages(ctx, "s", session.Query{})
	if err != nil || len(msgs.Items) != 2 || !bytes.Equal(msgs.Items[1], message) {
		t.Fatalf("messages = %s, %v; want them as saved", msgs.Items, err)
	}
	arts, err := st.Artifacts(ctx, "s", []string{"env"}, true)
	if err != nil || !bytes.Equal(arts.Items[0].Data, data) {
		t.Fatalf("artifact data changed: %v", err)
	}

	scan, err := session.ScanSecrets(ctx, st, []string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	type at struct {
		where, id string
		index     int64
		rule      string
		offset    int64
	}
	var want []at
	for _, s := range secretValues {
		want = append(want, at{"message", "", 1, s.rule, int64(bytes.Index(message, []byte(jsonString(t, s.value)[1:len(jsonString(t, s.value))-1])))})
	}
	want = append(want, at{"trace", "", 1, "github_token", int64(bytes.Index(trace, []byte(secretValues[3].value)))})
	for _, s := range secretValues {
		want = append(want, at{"artifact", "env", -1, s.rule, int64(bytes.Index(data, []byte(s.value)))})
	}
	var got []at
	for _, f := range scan.Findings {
		got = append(got, at{f.Where, f.ID, f.Index, f.Rule, f.Offset})
		for _, s := range secretValues {
			if len(f.Redacted) > 8 || strings.Contains(s.value, f.Redacted) && len(f.Redacted) > 4 {
				t.Errorf("finding %+v shows too much of the secret", f)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("findings:\n got %v\nwant %v", got, want)
	}
	if scan.Found != int64(len(want)) || scan.Sessions != 1 || scan.Messages != 2 || scan.Traces != 2 || scan.Artifacts != 2 {
		t.Errorf("scan counts = %+v", *scan)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	needles := append([]string(nil), all...)
	found := grepStore(t, root, needles)
	for _, s := range all {
		if !found[s] {
			t.Errorf("content secret %.16q… is not in the store's bytes: content was changed", s)
		}
	}
}
