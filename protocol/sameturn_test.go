package protocol

import (
	"testing"

	"github.com/cairn-dev/cairn/session"
)

// TestSameValue: a retried turn is the same one when its JSON values are,
// whatever their texts.
func TestSameValue(t *testing.T) {
	for _, c := range []struct {
		x, y string
		same bool
	}{
		{`{"a":1,"b":[true,null,"s"]}`, `{ "b" : [true, null, "s"], "a" : 1 }`, true},
		{`1`, `1.0`, true},
		{`[1e2]`, `[100]`, true},
		{`"A\u00e9"`, `"Aé"`, true},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1,"b":1}`, false},
		{`{"a":null}`, `{}`, false},
		{`"1"`, `1`, false},
		{`0`, `false`, false},
		{`null`, ``, false},
		{``, ``, true},
		{`{"a":1`, `{"a":1 }`, false},
		{`-0`, `0.0e5`, true},
		{`-1.50`, `-15e-1`, true},
		{`1.5`, `-1.5`, false},
		{`0.001`, `1E-3`, true},
		{`1e100000000`, `10e99999999`, true},
		{`1e100000000`, `1e100000001`, false},
		{`1e9223372036854775807`, `10e9223372036854775806`, true},
		{`1e99999999999999999999`, `1e99999999999999999999`, true},
		{`1e99999999999999999999`, `10e99999999999999999998`, false},
	} {
		if got := sameValue(session.Value(c.x), session.Value(c.y)); got != c.same {
			t.Errorf("sameValue(%s, %s) = %v, want %v", c.x, c.y, got, c.same)
		}
		if got := sameValue(session.Value(c.y), session.Value(c.x)); got != c.same {
			t.Errorf("sameValue(%s, %s) = %v, want %v", c.y, c.x, got, c.same)
		}
	}
}
