package engine

import (
	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/session"
)

// normalize validates and canonicalises a change before any commit:
// session.Normalize (schema, ids, JSON values, statuses, digests, secret
// keys, environment names only), then the rules of the handoff record
// (a next step needs its task and done condition; a reviewed version is a
// commit id or a content digest) and of the runtime record (unique process
// names, loopback-only health check URLs, previews naming recorded
// processes), which live in their own packages.
func normalize(c *session.Change) error { return normalizeKnown(c, nil) }

// normalizeKnown is normalize, not scanning again the JSON values known
// reports as validated (see internal/checked).
func normalizeKnown(c *session.Change, known func(session.Value) bool) error {
	if err := session.NormalizeKnown(c, known); err != nil {
		return err
	}
	if err := handoff.ValidateChange(c); err != nil {
		return err
	}
	rt := c.Runtime
	if c.Replace != nil {
		rt = c.Replace.Runtime
	}
	return procs.Validate(rt)
}
