package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference is what Valid must agree with.
func reference(b []byte) bool { return json.Valid(b) && utf8.Valid(b) }

var corpus = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e5`, `1E+5`, `1e-05`, `-1.5e+3`, `1.5e`, `+1`, `0x1`, `1_000`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `NaN`, `Infinity`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, `"\'"`, `"a`, `"\`,
	"\"\x01\"", "\"\x1f\"", "\"\x7f\"", "\"caf\xc3\xa9\"", "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\"\xf0\x9f\x98\x80\"",
	`[]`, `[ ]`, `[1]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `[`, `]`, `[[]]`, `[[],[{}]]`, `[1}`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : 1 }`, `{"a":1,}`, `{,"a":1}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":1,"b":[true,null,{"c":"d"}]}`, `{1:2}`, `{"a":1]`,
	" \t\n\r{\"a\" :\n[ 1 , 2 ]\r}\t ", "\v1", "1\v", `1 2`, `{}{}`, `[] x`, "\xff", "1\xff",
	`{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","input":{"path":"a.go"}}]}`,
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range corpus {
		if got, want := Valid([]byte(s)), reference([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v; json.Valid && utf8.Valid = %v", s, got, want)
		}
	}
}

// TestValidMutations flips, drops and inserts bytes of valid documents and
// checks every result against encoding/json.
func TestValidMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	alphabet := []byte("{}[]:,\"\\ u0123456789.eE+-abtrueflsn\x00\x1f\x7f\xc3\xa9\xff\t\n")
	var seeds [][]byte
	for _, s := range corpus {
		if reference([]byte(s)) {
			seeds = append(seeds, []byte(s))
		}
	}
	for n := 0; n < 200000; n++ {
		b := append([]byte(nil), seeds[r.IntN(len(seeds))]...)
		for k := 1 + r.IntN(3); k > 0; k-- {
			switch op := r.IntN(3); {
			case op == 0 && len(b) > 0:
				b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
			case op == 1 && len(b) > 0:
				i := r.IntN(len(b))
				b = append(b[:i], b[i+1:]...)
			default:
				i := r.IntN(len(b) + 1)
				b = append(b[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		if got, want := Valid(b), reference(b); got != want {
			t.Fatalf("Valid(%q) = %v; json.Valid && utf8.Valid = %v", b, got, want)
		}
	}
}

func TestValidDepth(t *testing.T) {
	for _, d := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, inner := range []string{"", "1", "{}"} {
			s := strings.Repeat("[", d) + inner + strings.Repeat("]", d)
			if got, want := Valid([]byte(s)), reference([]byte(s)); got != want {
				t.Errorf("depth %d, inner %q: Valid = %v; encoding/json = %v", d, inner, got, want)
			}
		}
		s := strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d)
		if got, want := Valid([]byte(s)), reference([]byte(s)); got != want {
			t.Errorf("object depth %d: Valid = %v; encoding/json = %v", d, got, want)
		}
	}
}

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		in  string
		at  int
		end int
		ok  bool
	}{
		{`[1,2] x`, 0, 5, true},
		{`x"ab"y`, 1, 5, true},
		{`{"a":{"b":[]}},`, 0, 14, true},
		{`12,`, 0, 2, true},
		{` 1`, 0, 0, false}, // Value does not skip leading space
		{`[1,`, 0, 0, false},
	} {
		end, ok := Value([]byte(tc.in), tc.at)
		if end != tc.end || ok != tc.ok {
			t.Errorf("Value(%q, %d) = %d, %v; want %d, %v", tc.in, tc.at, end, ok, tc.end, tc.ok)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range corpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), reference(b); got != want {
			t.Fatalf("Valid(%q) = %v; json.Valid && utf8.Valid = %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	msg := []byte(`{"role":"assistant","content":[{"type":"text","text":"` + strings.Repeat("y", 3000) +
		`"},{"type":"tool_use","id":"t1","name":"edit","input":{"path":"src/a.go","patch":"` + strings.Repeat("z", 3000) + `"}}]}`)
	b.Run("jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			Valid(msg)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			_ = json.Valid(msg) && utf8.Valid(msg)
		}
	})
}

// TestValidLongStrings puts each kind of byte at every position of a
// string longer than the 32 and 8 bytes String skips at a time.
func TestValidLongStrings(t *testing.T) {
	for _, c := range []string{`"`, `\`, `\n`, `\u00e9`, "\x00", "\x01", "\x1f", " ", "!", "#", "[", "]", "~", "\x7f", "\x80", "\xc3", "\xc3\xa9", "\xe2\x82\xac", "\xed\xa0\x80", "\xff"} {
		for p := 0; p < 72; p++ {
			for _, tail := range []int{0, 1, 7, 8, 9, 20, 31, 32, 33, 40, 70} {
				s := `"` + strings.Repeat("a", p) + c + strings.Repeat("b", tail) + `"`
				if got, want := Valid([]byte(s)), reference([]byte(s)); got != want {
					t.Errorf("Valid(%q) = %v; json.Valid && utf8.Valid = %v", s, got, want)
				}
			}
		}
	}
}
