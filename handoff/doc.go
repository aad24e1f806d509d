// Package handoff turns a session's latest generation into what the next
// agent or person needs to pick the work up: it validates the handoff
// record (Validate, ValidateVerification, ValidateChange), says what a
// handoff still lacks (Check) and renders HANDOFF.md from the evidence
// (Render).
//
// # Guarantees
//
//   - Render is a pure function of its Input: the same input gives the same
//     bytes (no clock, no map order, no environment), so HANDOFF.md is
//     golden-testable and diffable between generations.
//   - Nothing the session cannot prove is printed as done. An item of
//     handoff.verified counts as verified only when a passed check backs it
//     (see Render for the rule); otherwise it is printed under Unverified
//     with the reason. Failed, not-run and skipped checks are listed
//     plainly. Files changed are printed only when workspace tracking
//     provided them; otherwise an explicit "not tracked" line says so.
//   - Recorded processes and previews are printed as things to restart,
//     never as running.
//   - Check names each missing part with a stable key (the Key constants)
//     that scripts may rely on.
//
// # Caveats
//
// The package reads what the session recorded; it runs no git command and
// no check. "Current git head" is the head recorded with the generation
// unless the caller passes a live reading in Input.Git.
//
// The package imports session only, so it is cheap to call from any layer;
// session itself cannot import it (that would be an import cycle), so the
// engine calls ValidateChange next to session.Normalize.
package handoff
