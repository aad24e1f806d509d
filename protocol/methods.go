package protocol

import (
	"slices"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// CheckEvents returns an invalid_argument error naming the first of names
// that is not an event a subscriber may name (api.SubscribableEvents).
func CheckEvents(names []string) error {
	known := api.SubscribableEvents()
	for _, n := range names {
		if !slices.Contains(known, n) {
			if len(n) > 64 {
				n = n[:64] + "…"
			}
			return session.Errorf(session.CodeInvalidArgument, "unknown event %q", n)
		}
	}
	return nil
}
