package engine_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestVerifySecrets saves credential-shaped strings in content and checks
// that verify reports each where it is only when asked, on every store,
// and that the content is kept as saved.
func TestVerifySecrets(t *testing.T) {
	const tok = "ghp_4Nq8Lx2Vm9Wz7Kp1Rt3Ys6Bd0Fg5Jh2Ca8Ue4O"
	const aws = "AKIAIOSFODNN7EXAMPLE"
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		msg := session.Value(`{"role":"user","content":"use ` + tok + `"}`)
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{
			AppendMessages:  []session.Value{session.Value(`"hello"`), msg},
			AppendTraces:    []session.Trace{{Type: "env", Data: session.Value(`{"AWS":"` + aws + `"}`)}},
			AppendArtifacts: []session.Artifact{{ID: "log", Data: []byte("key=" + aws + "\n")}},
		}})
		noErr(t, err)
		plain, err := e.Verify(ctx, session.VerifyRequest{})
		noErr(t, err)
		if plain.Secrets != nil {
			t.Fatalf("verify without secrets scanned: %+v", plain.Secrets)
		}
		rep, err := e.Verify(ctx, session.VerifyRequest{Secrets: true})
		noErr(t, err)
		if !rep.OK || rep.Secrets == nil {
			t.Fatalf("verify --secrets = %+v", rep)
		}
		want := []session.SecretFinding{
			{SessionID: "s", Where: "message", Index: 1, Offset: int64(strings.Index(string(msg), tok)), Rule: "github_token", Redacted: "ghp_…"},
			{SessionID: "s", Where: "trace", Index: 0, Offset: 8, Rule: "aws_access_key_id", Redacted: "AKIA…"},
			{SessionID: "s", Where: "artifact", Index: -1, ID: "log", Offset: 4, Rule: "aws_access_key_id", Redacted: "AKIA…"},
		}
		if got, w := mustJSON(t, rep.Secrets.Findings), mustJSON(t, want); got != w {
			t.Fatalf("findings:\n got %s\nwant %s", got, w)
		}
		res, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if string(res.Snapshot.Messages[1]) != string(msg) {
			t.Fatalf("message changed: %s", res.Snapshot.Messages[1])
		}
	})
}
