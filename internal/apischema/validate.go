package apischema

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Validate checks the JSON document v (as encoding/json decodes into any)
// against the $defs type name of doc, and returns every mismatch, each
// with its path. It knows the subset of JSON Schema that Generate writes.
func (doc *Document) Validate(name string, v any) []error {
	var errs []error
	doc.check(&Type{Ref: "#/$defs/" + name}, v, name, &errs)
	return errs
}

func (doc *Document) check(t *Type, v any, path string, errs *[]error) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if t.Ref != "" {
		def := doc.Defs[strings.TrimPrefix(t.Ref, "#/$defs/")]
		if def == nil {
			fail("no type %s", t.Ref)
			return
		}
		doc.check(def, v, path, errs)
		return
	}
	if t.AnyOf != nil {
		for _, alt := range t.AnyOf {
			var sub []error
			doc.check(alt, v, path, &sub)
			if len(sub) == 0 {
				return
			}
		}
		fail("matches none of its alternatives")
		return
	}
	switch t.Type {
	case nil:
		return // any value
	case "null":
		if v != nil {
			fail("want null, got %T", v)
		}
	case "string":
		s, ok := v.(string)
		if !ok {
			fail("want a string, got %s", kind(v))
		} else if t.Enum != nil && !slices.Contains(t.Enum, s) {
			fail("%q is not one of %v", s, t.Enum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("want a boolean, got %s", kind(v))
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			fail("want a number, got %s", kind(v))
		} else if t.Type == "integer" && !isInteger(n) {
			fail("want an integer, got %s", n)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			fail("want an array, got %s", kind(v))
			return
		}
		for i, e := range a {
			doc.check(t.Items, e, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("want an object, got %s", kind(v))
			return
		}
		for _, k := range t.Required {
			if _, ok := m[k]; !ok {
				fail("missing required %q", k)
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := t.Properties[k]; ok {
				doc.check(p, m[k], path+"."+k, errs)
				continue
			}
			switch ap := t.AdditionalProperties; {
			case ap == nil: // any key
			case ap.Schema == nil:
				fail("unknown field %q", k)
			default:
				doc.check(ap.Schema, m[k], path+"."+k, errs)
			}
		}
	}
}

func isInteger(n json.Number) bool {
	if _, err := n.Int64(); err == nil {
		return true
	}
	_, err := strconv.ParseUint(string(n), 10, 64)
	return err == nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// Decode reads a JSON document with numbers kept as json.Number, as
// Validate expects.
func Decode(b []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
