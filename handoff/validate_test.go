package handoff_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/session"
)

func TestValidate(t *testing.T) {
	hex40 := strings.Repeat("a1", 20)
	cases := []struct {
		name string
		h    *session.Handoff
		want string // substring of the error; "" for valid
	}{
		{"nil", nil, ""},
		{"empty", &session.Handoff{}, ""},
		{"complete", complete().Handoff, ""},
		{"next step ok", &session.Handoff{NextStep: &session.NextStep{Task: "t", DoneWhen: "d"}}, ""},
		{"next step no task", &session.Handoff{NextStep: &session.NextStep{DoneWhen: "d"}}, "no task"},
		{"next step blank task", &session.Handoff{NextStep: &session.NextStep{Task: " \n", DoneWhen: "d"}}, "no task"},
		{"next step no done_when", &session.Handoff{NextStep: &session.NextStep{Task: "t"}}, "no done_when"},
		{"reviewed short commit", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: "abcdef0"}}, ""},
		{"reviewed sha256 commit", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: strings.Repeat("f", 64)}}, ""},
		{"reviewed upper hex", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: strings.ToUpper(hex40)}}, ""},
		{"reviewed digest only", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{DiffSHA256: strings.Repeat("0", 64)}}, ""},
		{"reviewed both", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{VCS: "git", Commit: hex40, DiffSHA256: strings.Repeat("0", 64)}}, ""},
		{"reviewed neither", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{VCS: "git"}}, "neither a commit nor a diff_sha256"},
		{"reviewed commit too short", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: "abc123"}}, "is not a commit id"},
		{"reviewed commit too long", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: strings.Repeat("a", 65)}}, "is not a commit id"},
		{"reviewed commit not hex", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: "HEAD~1234"}}, "is not a commit id"},
		{"reviewed digest short", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{DiffSHA256: hex40}}, "is not a SHA-256 digest"},
		{"reviewed good commit bad digest", &session.Handoff{ReviewedVersion: &session.ReviewedVersion{Commit: hex40, DiffSHA256: "sha256:xyz"}}, "is not a SHA-256 digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := handoff.Validate(tc.h)
			checkErr(t, err, tc.want)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want one containing %q", want)
	}
	if !errors.Is(err, session.ErrInvalidArgument) || session.CodeOf(err) != session.CodeInvalidArgument {
		t.Errorf("error %v is not invalid_argument", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

func TestValidateVerification(t *testing.T) {
	for _, st := range []string{session.CheckPassed, session.CheckFailed, session.CheckSkipped, session.CheckNotRun} {
		v := session.Verification{ID: "v", Checks: []session.Check{{Name: "c", Status: st}}}
		checkErr(t, handoff.ValidateVerification(v), "")
	}
	checkErr(t, handoff.ValidateVerification(session.Verification{ID: "v"}), "")
	checkErr(t, handoff.ValidateVerification(session.Verification{ID: "v", Checks: []session.Check{{Name: "c"}}}), `check "c" has no status`)
	checkErr(t, handoff.ValidateVerification(session.Verification{ID: "v", Checks: []session.Check{{Name: "c", Status: "ok"}}}), `status "ok"; want passed, failed, skipped or not_run`)
	checkErr(t, handoff.ValidateVerification(session.Verification{ID: "v", Checks: []session.Check{{Name: "c", Status: "Passed"}}}), `status "Passed"`)
}

// TestValidateAgreesWithSession checks that a status session.Normalize
// rejects is rejected here too, and one it accepts is accepted.
func TestValidateAgreesWithSession(t *testing.T) {
	for _, st := range []string{"", "passed", "failed", "skipped", "not_run", "ok", "PASSED", "not run"} {
		v := session.Verification{ID: "v", Checks: []session.Check{{Name: "c", Status: st}}}
		sessErr := session.Normalize(&session.Change{UpsertVerifications: []session.Verification{v}})
		ourErr := handoff.ValidateVerification(v)
		if (sessErr == nil) != (ourErr == nil) {
			t.Errorf("status %q: session says %v, handoff says %v", st, sessErr, ourErr)
		}
	}
}

func TestValidateChange(t *testing.T) {
	bad := &session.Handoff{NextStep: &session.NextStep{Task: "t"}}
	badV := []session.Verification{{ID: "v", Checks: []session.Check{{Name: "c", Status: "done"}}}}
	checkErr(t, handoff.ValidateChange(nil), "")
	checkErr(t, handoff.ValidateChange(&session.Change{Handoff: complete().Handoff}), "")
	checkErr(t, handoff.ValidateChange(&session.Change{Replace: complete()}), "")
	checkErr(t, handoff.ValidateChange(&session.Change{Handoff: bad}), "no done_when")
	checkErr(t, handoff.ValidateChange(&session.Change{UpsertVerifications: badV}), `status "done"`)
	s := complete()
	s.Handoff = bad
	checkErr(t, handoff.ValidateChange(&session.Change{Replace: s}), "no done_when")
	s = complete()
	s.Verifications = badV
	checkErr(t, handoff.ValidateChange(&session.Change{Replace: s}), `status "done"`)
}

func BenchmarkValidate(b *testing.B) {
	h := complete().Handoff
	b.ReportAllocs()
	for b.Loop() {
		if err := handoff.Validate(h); err != nil {
			b.Fatal(err)
		}
	}
}
