package checked

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

func TestKnownByIdentity(t *testing.T) {
	if Known(context.Background()) != nil {
		t.Fatal("a plain context knows values")
	}
	a, b := session.Value(`{"a":1}`), session.Value(`[2]`)
	ctx := With(context.Background(), a, nil)
	ctx2 := With(ctx, b)
	if With(ctx, nil, session.Value{}) != ctx {
		t.Error("With of empty values made a new context")
	}
	k, k2 := Known(ctx), Known(ctx2)
	for _, tc := range []struct {
		name    string
		v       session.Value
		in, in2 bool
	}{
		{"a", a, true, true},
		{"b", b, false, true},
		{"copy of a", append(session.Value(nil), a...), false, false},
		{"prefix of a", a[:len(a)-1], false, false},
		{"suffix of a", a[1:], false, false},
		{"empty", session.Value{}, false, false},
	} {
		if got := k(tc.v); got != tc.in {
			t.Errorf("%s: Known(ctx) = %v", tc.name, got)
		}
		if got := k2(tc.v); got != tc.in2 {
			t.Errorf("%s: Known(child ctx) = %v", tc.name, got)
		}
	}
}
