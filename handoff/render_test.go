package handoff_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/session"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files from the current output")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./handoff -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered output (go test ./handoff -update rewrites it after review)\n--- got ---\n%s", path, got)
	}
}

// missingCases removes each required part of a complete handoff in turn.
var missingCases = []struct {
	key    string
	remove func(s *session.Snapshot)
}{
	{handoff.KeyResult, func(s *session.Snapshot) { s.Handoff.Done = nil }},
	{handoff.KeyVerification, func(s *session.Snapshot) { s.Verifications = nil }},
	{handoff.KeyRestartPath, func(s *session.Snapshot) { s.Handoff.Restart.Commands = nil }},
	{handoff.KeyReviewedVersion, func(s *session.Snapshot) { s.Handoff.ReviewedVersion = nil }},
	{handoff.KeyRisks, func(s *session.Snapshot) { s.Handoff.Risks, s.Handoff.DecisionsPending = nil, nil }},
	{handoff.KeyNextStep, func(s *session.Snapshot) { s.Handoff.NextStep = nil }},
}

func TestRenderGolden(t *testing.T) {
	t.Run("complete", func(t *testing.T) {
		s := complete()
		if m := handoff.Check(s); len(m) != 0 {
			t.Fatalf("Check(complete) = %v, want nothing missing", m)
		}
		golden(t, "complete", handoff.Render(handoff.Input{Snapshot: s, Files: completeFiles()}))
	})
	t.Run("failed_and_not_run", func(t *testing.T) {
		golden(t, "failed_and_not_run", handoff.Render(handoff.Input{Snapshot: failing()}))
	})
	t.Run("empty", func(t *testing.T) {
		s := &session.Snapshot{SchemaVersion: 1, SessionID: "fresh", Generation: 1, CreatedAt: t0, UpdatedAt: t0}
		golden(t, "empty", handoff.Render(handoff.Input{Snapshot: s}))
	})
	for _, tc := range missingCases {
		t.Run("missing_"+tc.key, func(t *testing.T) {
			s := complete()
			tc.remove(s)
			m := handoff.Check(s)
			if len(m) != 1 || m[0].Key != tc.key {
				t.Fatalf("Check = %v, want exactly %q", m, tc.key)
			}
			out := handoff.Render(handoff.Input{Snapshot: s, Files: completeFiles()})
			if !strings.Contains(section(out, "Missing from this handoff"), "`"+tc.key+"`") {
				t.Errorf("HANDOFF.md does not name the missing part %q", tc.key)
			}
			golden(t, "missing_"+tc.key, out)
		})
	}
}

// section returns the text of the "## title" section of a rendered file,
// its subsections included.
func section(md []byte, title string) string { return part(md, "## "+title, "\n## ") }

// subsection returns the text of the "### title" subsection.
func subsection(md []byte, title string) string { return part(md, "### "+title, "\n#") }

// part returns the text from the line heading up to the next line that
// starts with end (end begins with a newline), or "" without that heading.
func part(md []byte, heading, end string) string {
	s := string(md)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	s = s[i+1:]
	if j := strings.Index(s[1:], end); j >= 0 {
		s = s[:j+1]
	}
	return s
}

func TestRenderDeterministic(t *testing.T) {
	for _, s := range []*session.Snapshot{complete(), failing(), nil} {
		in := handoff.Input{Snapshot: s, Files: completeFiles()}
		a, b := handoff.Render(in), handoff.Render(in)
		if !bytes.Equal(a, b) {
			t.Fatal("two renders of the same input differ")
		}
	}
}

// TestRenderNeverClaimsUnproven checks the rule that anything the session
// cannot prove is printed as unverified, never as done or verified.
func TestRenderNeverClaimsUnproven(t *testing.T) {
	out := handoff.Render(handoff.Input{Snapshot: failing()})
	verified, unverified := subsection(out, "Verified"), subsection(out, "Unverified")
	for _, want := range []string{"lint — check `lint` passed", "go vet ./... is clean — check `go vet ./...` passed"} {
		if !strings.Contains(verified, want) {
			t.Errorf("Verified lacks %q:\n%s", want, verified)
		}
	}
	for _, claim := range []string{"unit tests", "Totals round half-even", "Currency other than EUR."} {
		if strings.Contains(verified, "- "+claim) {
			t.Errorf("%q is printed as verified:\n%s", claim, verified)
		}
	}
	for _, want := range []string{
		"- unit tests — recorded as verified, but check `unit tests` failed in its latest report (`ver-2`)",
		"- Totals round half-even — recorded as verified, but no passed check backs it",
		"- Currency other than EUR.",
		"- check `unit tests` failed (report `ver-2`): `go test ./...`",
		"- check `e2e checkout` was not run (report `ver-2`): `npm run e2e -- --grep checkout`",
		"- check `migration dry run` was skipped (report `ver-2`): `make migrate-dry`",
	} {
		if !strings.Contains(unverified, want) {
			t.Errorf("Unverified lacks %q:\n%s", want, unverified)
		}
	}
	if got := section(out, "What changed"); !strings.Contains(got, "Files changed: not tracked.") {
		t.Errorf("untracked files not said plainly:\n%s", got)
	}
	if got := section(out, "Reviewed version"); !strings.Contains(got, "is not the git head") {
		t.Errorf("reviewed commit != head not flagged:\n%s", got)
	}
	if got := section(out, "In progress"); !strings.Contains(got, "run `run-2` was still running") {
		t.Errorf("running run not listed as in progress:\n%s", got)
	}
	if got := section(out, "Restart path"); !strings.Contains(got, "They must be restarted; cairn\nnever assumes they survived") {
		t.Errorf("processes not marked as needing a restart:\n%s", got)
	}
}

func TestRenderVerifiedBacking(t *testing.T) {
	checks := []session.Check{
		{Name: "Unit Tests", Command: "go test ./...", Status: session.CheckPassed},
		{Name: "fmt", Command: "gofmt -l .", Status: session.CheckFailed},
	}
	cases := []struct {
		item     string
		verified bool
	}{
		{"unit tests", true},                      // name, any case
		{"  `go test ./...`  ", true},             // command, backticks and space trimmed
		{"ran go test ./... and it passed", true}, // contains the command
		{"unit", false},                           // part of a name is not the name
		{"fmt", false},                            // backed by a failed check
		{"everything works", false},               // names no check
	}
	for _, tc := range cases {
		t.Run(tc.item, func(t *testing.T) {
			s := &session.Snapshot{SessionID: "s", Verifications: []session.Verification{{ID: "v", Checks: checks}},
				Handoff: &session.Handoff{Verified: []string{tc.item}}}
			out := handoff.Render(handoff.Input{Snapshot: s})
			inVerified := strings.Contains(subsection(out, "Verified"), "- "+strings.TrimSpace(tc.item))
			inUnverified := strings.Contains(subsection(out, "Unverified"), "- "+strings.TrimSpace(tc.item))
			if inVerified != tc.verified || inUnverified == tc.verified {
				t.Errorf("item %q: under Verified %v, under Unverified %v; want verified=%v\n%s", tc.item, inVerified, inUnverified, tc.verified, out)
			}
		})
	}
}

func TestRenderLatestResultDecides(t *testing.T) {
	s := &session.Snapshot{SessionID: "s",
		Verifications: []session.Verification{
			{ID: "v1", Checks: []session.Check{{Name: "tests", Command: "make test", Status: session.CheckFailed}}},
			{ID: "v2", Checks: []session.Check{{Name: "tests", Command: "make test", Status: session.CheckPassed}}},
		},
		Handoff: &session.Handoff{Verified: []string{"tests"}}}
	out := handoff.Render(handoff.Input{Snapshot: s})
	if !strings.Contains(subsection(out, "Verified"), "- tests — check `tests` passed (report `v2`)") {
		t.Errorf("a later passing run should back the claim:\n%s", out)
	}
	if strings.Contains(subsection(out, "Unverified"), "tests") {
		t.Errorf("a check that later passed is listed as unverified:\n%s", out)
	}
}

func TestRenderGitLiveReading(t *testing.T) {
	s := complete()
	out := handoff.Render(handoff.Input{Snapshot: s, Git: &handoff.Git{Head: head[:12], Branch: "rate-limit", Dirty: true}})
	got := section(out, "Reviewed version")
	for _, want := range []string{"Git head (read now): `" + head[:12] + "`", "working tree dirty", "uncommitted\nchanges that the review did not cover"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	s.Handoff.ReviewedVersion = &session.ReviewedVersion{DiffSHA256: strings.Repeat("ab", 32)}
	got = section(handoff.Render(handoff.Input{Snapshot: s}), "Reviewed version")
	if !strings.Contains(got, "Reviewed by content digest only") {
		t.Errorf("digest-only review not qualified:\n%s", got)
	}
}

func TestRenderFilesTrackedNone(t *testing.T) {
	out := handoff.Render(handoff.Input{Snapshot: complete(), Files: handoff.Files{Tracked: true}})
	if !strings.Contains(section(out, "What changed"), "Files changed, per the workspace manifests: none.") {
		t.Errorf("tracked, no changes: not said:\n%s", out)
	}
}

func TestCheck(t *testing.T) {
	all := []string{handoff.KeyResult, handoff.KeyVerification, handoff.KeyRestartPath, handoff.KeyReviewedVersion, handoff.KeyRisks, handoff.KeyNextStep}
	keys := func(m []api.HandoffMissing) []string {
		var k []string
		for _, x := range m {
			k = append(k, x.Key)
			if x.Message == "" {
				t.Errorf("missing %q has no message", x.Key)
			}
		}
		return k
	}
	if got := keys(handoff.Check(nil)); !slices.Equal(got, all) {
		t.Errorf("Check(nil) = %v, want %v", got, all)
	}
	if got := keys(handoff.Check(&session.Snapshot{})); !slices.Equal(got, all) {
		t.Errorf("Check(empty) = %v, want %v", got, all)
	}
	partial := []struct {
		name   string
		key    string
		change func(s *session.Snapshot)
	}{
		{"blank done items", handoff.KeyResult, func(s *session.Snapshot) { s.Handoff.Done = []string{" ", ""} }},
		{"report without checks", handoff.KeyVerification, func(s *session.Snapshot) { s.Verifications[0].Checks = nil }},
		{"restart without commands", handoff.KeyRestartPath, func(s *session.Snapshot) { s.Handoff.Restart = &session.Restart{Workdir: "/x"} }},
		{"reviewed version empty", handoff.KeyReviewedVersion, func(s *session.Snapshot) { s.Handoff.ReviewedVersion = &session.ReviewedVersion{VCS: "git"} }},
		{"reviewed version malformed", handoff.KeyReviewedVersion, func(s *session.Snapshot) {
			s.Handoff.ReviewedVersion = &session.ReviewedVersion{Commit: "HEAD"}
		}},
		{"next step without done_when", handoff.KeyNextStep, func(s *session.Snapshot) { s.Handoff.NextStep.DoneWhen = "" }},
		{"next step without task", handoff.KeyNextStep, func(s *session.Snapshot) { s.Handoff.NextStep.Task = " " }},
	}
	for _, tc := range partial {
		t.Run(tc.name, func(t *testing.T) {
			s := complete()
			tc.change(s)
			if got := keys(handoff.Check(s)); !slices.Equal(got, []string{tc.key}) {
				t.Errorf("Check = %v, want [%s]", got, tc.key)
			}
		})
	}
	// Only decisions, or a risk "none", are enough for risks/decisions.
	for _, h := range []session.Handoff{{DecisionsPending: []string{"x"}}, {Risks: []string{"none"}}} {
		s := complete()
		s.Handoff.Risks, s.Handoff.DecisionsPending = h.Risks, h.DecisionsPending
		if m := handoff.Check(s); len(m) != 0 {
			t.Errorf("Check with risks %v decisions %v = %v, want nothing", h.Risks, h.DecisionsPending, m)
		}
	}
}

// FuzzRender checks that any recorded text renders without panicking, the
// same way twice, and that a verified claim naming no check is never
// printed as verified.
func FuzzRender(f *testing.F) {
	f.Add("unit tests", "go test ./...", "passed", "ok", "x\n```\ny")
	f.Add("", "", "", "", "")
	f.Add("`", "``", "not_run", "\r\n\xff", "- item\n# heading")
	f.Fuzz(func(t *testing.T, name, command, status, output, claim string) {
		s := complete()
		s.Verifications = append(s.Verifications, session.Verification{ID: name, Checks: []session.Check{{Name: name, Command: command, Status: status, Output: output}}})
		s.Handoff.Verified = []string{claim}
		s.Handoff.Done = append(s.Handoff.Done, output)
		in := handoff.Input{Snapshot: s, Files: handoff.Files{Tracked: true, Added: []string{claim}}}
		a := handoff.Render(in)
		if !bytes.Equal(a, handoff.Render(in)) {
			t.Fatal("not deterministic")
		}
		if strings.Contains(claim, "\n") || strings.TrimSpace(claim) == "" {
			return
		}
		if c := strings.ToLower(strings.Trim(strings.TrimSpace(claim), "`")); c == "unit tests" || c == "login e2e" ||
			strings.Contains(c, "go test ./...") || strings.Contains(c, "npm run e2e -- --grep login") ||
			(name != "" && c == strings.ToLower(strings.Trim(strings.TrimSpace(name), "`"))) ||
			(command != "" && strings.Contains(c, strings.ToLower(strings.Trim(strings.TrimSpace(command), "`")))) {
			return // it names a check; whether it is verified depends on the status
		}
		if strings.Contains(subsection(a, "Verified"), "- "+strings.TrimRight(claim, " \t\r")+" — check") {
			t.Fatalf("claim %q names no check but is printed as verified", claim)
		}
	})
}

func TestRenderReviewedAgainstHead(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	cases := []struct {
		name string
		rv   *session.ReviewedVersion
		git  *handoff.Git
		want string
	}{
		{"head clean", &session.ReviewedVersion{Commit: head}, &handoff.Git{Head: head}, "is the git head, and the working tree is clean"},
		{"abbreviated head", &session.ReviewedVersion{Commit: head[:7]}, &handoff.Git{Head: head}, "is the git head, and the working tree is clean"},
		{"other commit", &session.ReviewedVersion{Commit: "0123456"}, &handoff.Git{Head: head}, "is not the git head"},
		{"head dirty", &session.ReviewedVersion{Commit: head}, &handoff.Git{Head: head, Dirty: true}, "changes that the review did not cover"},
		{"head dirty with digest", &session.ReviewedVersion{Commit: head, DiffSHA256: digest}, &handoff.Git{Head: head, Dirty: true}, "cannot tell whether it\nmatches"},
		{"head unknown", &session.ReviewedVersion{Commit: head}, nil, "The git head is unknown"},
		{"digest only", &session.ReviewedVersion{DiffSHA256: digest}, &handoff.Git{Head: head}, "Reviewed by content digest only"},
		{"malformed", &session.ReviewedVersion{Commit: "main"}, &handoff.Git{Head: head}, "is malformed"},
		{"none", nil, &handoff.Git{Head: head}, "No reviewed version recorded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := complete()
			s.Workspace = nil
			s.Handoff.ReviewedVersion = tc.rv
			got := section(handoff.Render(handoff.Input{Snapshot: s, Git: tc.git}), "Reviewed version")
			if !strings.Contains(got, tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, got)
			}
		})
	}
}
