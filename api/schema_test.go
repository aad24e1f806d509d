package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/apischema"
)

var update = flag.Bool("update", false, "write schema.json and any missing fixture")

// TestSchemaUpToDate fails when schema.json differs from what package api
// generates: run go generate ./api after changing a type.
func TestSchemaUpToDate(t *testing.T) {
	want, err := apischema.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("schema.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("api/schema.json is stale: run go generate ./api")
	}
}

func loadSchema(t *testing.T) *apischema.Document {
	t.Helper()
	b, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := apischema.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestFixtures checks that fixtures/ holds one document per object type of
// the schema and no other; that each fills every field its type has,
// validates against the schema, and decodes into the Go type (unknown
// fields refused) and encodes back to the same JSON.
func TestFixtures(t *testing.T) {
	doc := loadSchema(t)
	types := apischema.Types()
	files, err := filepath.Glob("fixtures/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if doc.Defs[name] == nil {
			t.Errorf("%s: no type %s in schema.json", f, name)
		}
	}
	for name, def := range doc.Defs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("fixtures", name+".json")
			b, err := os.ReadFile(path)
			if os.IsNotExist(err) && *update {
				b = example(doc, def, "")
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			v, err := apischema.Decode(b)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, err := range doc.Validate(name, v) {
				t.Error(err)
			}
			for key := range def.Properties {
				if _, ok := v.(map[string]any)[key]; !ok {
					t.Errorf("%s does not fill %q: a fixture fills every field", path, key)
				}
			}
			goType := types[name]
			ptr := reflect.New(goType)
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(ptr.Interface()); err != nil {
				t.Fatalf("%s into %v: %v", path, goType, err)
			}
			back, err := json.Marshal(ptr.Interface())
			if err != nil {
				t.Fatal(err)
			}
			w, _ := apischema.Decode(back)
			if !reflect.DeepEqual(v, w) {
				t.Errorf("%s does not survive a round trip through %v:\n got %s\nwant %s", path, goType, back, b)
			}
		})
	}
}

// TestMethodTable checks the table's invariants: unique names, and every
// params and result type is a struct (a CBOR or JSON map on the wire).
func TestMethodTable(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range slices.Concat(api.Methods, api.LibMethods) {
		if seen[m.Name] {
			t.Errorf("method %s listed twice", m.Name)
		}
		seen[m.Name] = true
		for _, typ := range []reflect.Type{m.Params, m.Result, m.LibParams, m.LibResult} {
			if typ != nil && typ.Kind() != reflect.Struct {
				t.Errorf("%s: %v is not a struct", m.Name, typ)
			}
		}
	}
}

// TestNewEvent checks that an event's data map has exactly the json names
// of its data type, with the values given.
func TestNewEvent(t *testing.T) {
	ev := api.NewEvent(api.EventRunCheckpointed, api.RunCheckpointedData{SessionID: "s", RunID: "r", Turn: 3, Generation: 7})
	want := map[string]any{"session_id": "s", "run_id": "r", "turn": int64(3), "generation": uint64(7)}
	if ev.Type != api.EventRunCheckpointed || !reflect.DeepEqual(ev.Data, want) {
		t.Fatalf("NewEvent = %+v, want data %v", ev, want)
	}
}

// example builds a fixture for def: every field filled with a plausible
// value. Only -update uses it, for a type that has no fixture yet; the
// files are then edited by hand.
func example(doc *apischema.Document, def *apischema.Type, key string) []byte {
	b, _ := json.MarshalIndent(exampleValue(doc, def, key), "", "  ")
	return append(b, '\n')
}

var sampleStrings = map[string]string{
	"session_id": "s-2026-12-01", "new_id": "s-2026-12-01-fork", "run_id": "run-7", "parent_run_id": "run-6",
	"resumed_from": "run-6", "resumed_as": "run-8", "workflow_id": "wf-release", "step_id": "build",
	"identity": "sha256:4f2a", "task_id": "task-3", "name": "web", "url": "http://127.0.0.1:8080/",
	"clock": "c:1a2b:42", "since": "c:1a2b:40", "workspace": "/home/dev/project", "root": "/home/dev/project",
	"socket": "/home/dev/project/.cairn/cairnd.sock", "markdown": "# Handoff\n", "message": "a sentence for people",
	"sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", "media_type": "text/plain",
	"path": "src/main.go", "cwd": "/home/dev/project", "workdir": "/home/dev/project", "process": "web",
	"id": "art-1", "commit": "9f1c2e3", "vcs": "git", "diff_sha256": "ab12", "git_head": "9f1c2e3", "git_branch": "main",
	"server_version": "0.1.0", "version": "0.1.0", "client": "cairn-python 0.1.0", "event": "session.committed",
	"type": "tool_call", "kind": "file", "log": "/home/dev/project/.cairn/logs/web.log", "detail": "GET / answered 200",
	"error": "", "command": "go test ./...", "output": "ok", "summary": "all checks passed", "health_check": "curl -f http://127.0.0.1:8080/",
	"task": "ship the parser", "done_when": "make test passes", "brief": "write the parser", "agent": "codex", "warning": "",
	"data": "aGVsbG8=",
}

func exampleValue(doc *apischema.Document, t *apischema.Type, key string) any {
	if t.Ref != "" {
		return exampleValue(doc, doc.Defs[strings.TrimPrefix(t.Ref, "#/$defs/")], key)
	}
	if t.AnyOf != nil {
		return exampleValue(doc, t.AnyOf[0], key)
	}
	if len(t.Enum) > 0 {
		return t.Enum[0]
	}
	switch t.Type {
	case nil:
		return map[string]any{"role": "assistant", "content": "done: " + key}
	case "string":
		switch {
		case t.Format == "date-time":
			return "2026-12-01T10:00:00Z"
		case t.ContentEncoding == "base64":
			return "aGVsbG8="
		case sampleStrings[key] != "":
			return sampleStrings[key]
		}
		return key + "-1"
	case "boolean":
		return true
	case "integer":
		return 1
	case "number":
		return 0.5
	case "array":
		return []any{exampleValue(doc, t.Items, key)}
	case "object":
		m := map[string]any{}
		if t.Properties == nil {
			if ap := t.AdditionalProperties; ap != nil && ap.Schema != nil {
				m[key+"_key"] = exampleValue(doc, ap.Schema, key)
			}
			return m
		}
		keys := make([]string, 0, len(t.Properties))
		for k := range t.Properties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m[k] = exampleValue(doc, t.Properties[k], k)
		}
		return m
	}
	panic(fmt.Sprintf("no example for %+v", t))
}

// TestCheckServed checks the start-up check of the dispatchers: exactly
// the methods of the tables given, none missing and none unknown.
func TestCheckServed(t *testing.T) {
	all := api.MethodNames()
	if err := api.CheckServed(all, api.Methods); err != nil {
		t.Fatalf("every method served: %v", err)
	}
	if err := api.CheckServed(all[1:], api.Methods); err == nil || !strings.Contains(err.Error(), all[0]) {
		t.Errorf("one missing: %v, want an error naming %s", err, all[0])
	}
	if err := api.CheckServed(append(all, "bogus"), api.Methods); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("one unknown: %v, want an error naming bogus", err)
	}
	if err := api.CheckServed(all, api.Methods, api.LibMethods); err == nil || !strings.Contains(err.Error(), api.NextEvent.Name) {
		t.Errorf("a lib method missing: %v, want an error naming %s", err, api.NextEvent.Name)
	}
}
