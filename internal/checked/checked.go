// Package checked carries, in a context, the JSON values that code of
// this module has already validated (JSON syntax and UTF-8, as
// session.Normalize demands), so that the engine does not scan them again.
// A value is known by the identity of its bytes (address and length), not
// by content: only the very slice validated counts, and stored values are
// never written to after they are decoded. Being internal, the package
// cannot be used outside the module, so a value that reaches the engine
// from another Go program is always validated by the engine itself.
package checked

import (
	"context"
	"unsafe"

	"github.com/cairn-dev/cairn/session"
)

type key struct{}

type ident struct {
	p *byte
	n int
}

// set is the values of one context and those of its parent.
type set struct {
	ids    []ident
	parent *set
	small  [3]ident // ids' first array: a turn's messages and its state
	known  func(session.Value) bool
}

func (s *set) has(v session.Value) bool {
	id := ident{unsafe.SliceData(v), len(v)}
	for ; s != nil; s = s.parent {
		for _, x := range s.ids {
			if x == id {
				return true
			}
		}
	}
	return false
}

// With returns a context that also knows vs as validated. Empty values
// are not recorded: session.Normalize's rules for them differ by field.
// When ctx knows every value of vs already (the engine vouches for what it
// checked, which libcairn's decoder had vouched for before it), With
// returns ctx itself.
func With(ctx context.Context, vs ...session.Value) context.Context {
	parent := from(ctx)
	var s *set
	for _, v := range vs {
		if len(v) == 0 || parent.has(v) {
			continue
		}
		if s == nil {
			s = &set{parent: parent}
			s.ids = s.small[:0]
			// Made once here: Known, asked for it by each normalization,
			// would allocate the method value each time.
			s.known = s.has
		}
		s.ids = append(s.ids, ident{unsafe.SliceData(v), len(v)})
	}
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, s)
}

func from(ctx context.Context) *set {
	s, _ := ctx.Value(key{}).(*set)
	return s
}

// Known returns the test for session.NormalizeKnown: whether a value is
// one ctx knows as validated. It is nil when ctx knows none.
func Known(ctx context.Context) func(session.Value) bool {
	s := from(ctx)
	if s == nil {
		return nil
	}
	return s.known
}
