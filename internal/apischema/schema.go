// Package apischema generates schema.json, the machine-readable description
// of the wire shapes, from package api's method table by reflection, and
// checks JSON documents against it. The bindings' tests read schema.json
// and the fixtures beside it; the Go tests check both against package api.
package apischema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

// Document is schema.json.
type Document struct {
	Schema          string           `json:"$schema"`
	Title           string           `json:"title"`
	ProtocolVersion int              `json:"protocol_version"`
	SchemaVersion   int              `json:"schema_version"`
	Methods         []Method         `json:"methods"`
	LibMethods      []Method         `json:"lib_methods"`
	Events          []Event          `json:"events"`
	ErrorCodes      []string         `json:"error_codes"`
	Defs            map[string]*Type `json:"$defs"`
}

// Method is one entry of the method table, naming $defs types.
type Method struct {
	Name      string `json:"name"`
	Params    string `json:"params"`
	Result    string `json:"result"`
	LibParams string `json:"lib_params,omitempty"`
	LibResult string `json:"lib_result,omitempty"`
}

// Event names an event and the $defs type of its data.
type Event struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// Type is the subset of JSON Schema (2020-12) the generator writes.
type Type struct {
	Ref                  string           `json:"$ref,omitempty"`
	Type                 any              `json:"type,omitempty"` // a name, or a list of names
	Description          string           `json:"description,omitempty"`
	Format               string           `json:"format,omitempty"`
	ContentEncoding      string           `json:"contentEncoding,omitempty"`
	Enum                 []string         `json:"enum,omitempty"`
	Items                *Type            `json:"items,omitempty"`
	Properties           map[string]*Type `json:"properties,omitempty"`
	Required             []string         `json:"required,omitempty"`
	AdditionalProperties *Additional      `json:"additionalProperties,omitempty"`
	AnyOf                []*Type          `json:"anyOf,omitempty"`
}

// Additional is additionalProperties: false (Schema nil: no key but the
// properties) or the schema of every other key's value (a map's values).
type Additional struct {
	Schema *Type
}

// MarshalJSON writes false or the schema.
func (a Additional) MarshalJSON() ([]byte, error) {
	if a.Schema == nil {
		return []byte("false"), nil
	}
	return json.Marshal(a.Schema)
}

// UnmarshalJSON reads false or a schema.
func (a *Additional) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "false" {
		a.Schema = nil
		return nil
	}
	a.Schema = new(Type)
	return json.Unmarshal(b, a.Schema)
}

// rawJSON names the type of the JSON text held by a json.RawMessage field
// tagged schema:"<name>" (on the CBOR wire, that text as a byte string).
var rawJSON = map[string]reflect.Type{
	"Envelope": reflect.TypeFor[api.Envelope](),
}

// enums are the closed sets of values of some string fields, keyed by
// "Type.field", from the constants of the packages that produce them.
var enums = map[string][]string{
	"Run.status":                     {session.RunRunning, session.RunCompleted, session.RunInterrupted, session.RunFailed},
	"CompleteRunRequest.status":      {session.RunCompleted, session.RunInterrupted, session.RunFailed},
	"InterruptedRun.status":          {session.RunRunning, session.RunInterrupted},
	"ResumeSessionRequest.artifacts": {api.IncludeFull, api.IncludeMetadata, api.IncludeNone},
	"ResumeSessionRequest.traces":    {api.IncludeAll, api.IncludeNone},
	"RunEvent.kind":                  {session.EventTrace, session.EventCheckpoint},
	"Check.status":                   {session.CheckPassed, session.CheckFailed, session.CheckSkipped, session.CheckNotRun},
	"ProcessState.state":             processStates,
	"PreviewState.state":             processStates,
	"RestartResult.outcome":          {procs.OutcomeStarted, procs.OutcomeAlreadyHealthy, procs.OutcomeFailed},
	"RestartResult.state":            processStates,
	"StatusResult.state":             {api.StateServing, api.StateStopping},
	"FilesStatus.mode":               {workspace.ModeWatching, workspace.ModePolling},
	"LibStatus.mode":                 {"embedded", "daemon"},
	"FileChangedData.kind":           {workspace.KindAdded, workspace.KindModified, workspace.KindDeleted, workspace.KindOverflow},
	"HandoffMissing.key": {handoff.KeyResult, handoff.KeyVerification, handoff.KeyRestartPath,
		handoff.KeyReviewedVersion, handoff.KeyRisks, handoff.KeyNextStep},
}

var processStates = []string{procs.StateNotRunning, procs.StateHealthy, procs.StateUnhealthy, procs.StateUnknown}

type generator struct {
	defs  map[string]*Type
	types map[string]reflect.Type
}

// Generate returns schema.json's content for package api as it is built.
func Generate() ([]byte, error) {
	doc, _ := build()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Types returns the Go type of each $defs entry.
func Types() map[string]reflect.Type {
	_, types := build()
	return types
}

// Load reads schema.json as Validate needs it.
func Load(b []byte) (*Document, error) {
	var doc Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("apischema.Load: %w", err)
	}
	return &doc, nil
}

func build() (*Document, map[string]reflect.Type) {
	g := &generator{defs: map[string]*Type{}, types: map[string]reflect.Type{}}
	doc := Document{
		Schema:          "https://json-schema.org/draft/2020-12/schema",
		Title:           "cairn wire shapes (generated from package api; do not edit)",
		ProtocolVersion: api.ProtocolVersion,
		SchemaVersion:   api.SchemaVersion,
		Methods:         []Method{},
		LibMethods:      []Method{},
		Defs:            g.defs,
	}
	method := func(m api.Method) Method {
		out := Method{Name: m.Name, Params: g.named(m.Params), Result: g.named(m.Result)}
		if m.LibParams != nil {
			out.LibParams = g.named(m.LibParams)
		}
		if m.LibResult != nil {
			out.LibResult = g.named(m.LibResult)
		}
		return out
	}
	for _, m := range api.Methods {
		doc.Methods = append(doc.Methods, method(m))
	}
	for _, m := range api.LibMethods {
		doc.LibMethods = append(doc.LibMethods, method(m))
	}
	for _, e := range api.Events {
		doc.Events = append(doc.Events, Event{Name: e.Name, Data: g.named(e.Data)})
	}
	for _, c := range api.Codes() {
		doc.ErrorCodes = append(doc.ErrorCodes, string(c))
	}
	g.named(reflect.TypeFor[api.Event]())
	return &doc, g.types
}

// named adds the struct type t to $defs and returns its name.
func (g *generator) named(t reflect.Type) string {
	name := t.Name()
	if prev, ok := g.types[name]; ok {
		if prev != t {
			panic(fmt.Sprintf("apischema: two types named %s: %v and %v", name, prev, t))
		}
		return name
	}
	g.types[name] = t
	obj := &Type{Type: "object", Properties: map[string]*Type{}, Required: []string{}, AdditionalProperties: &Additional{}}
	g.defs[name] = obj
	g.fields(name, t, obj)
	sort.Strings(obj.Required)
	if len(obj.Required) == 0 {
		obj.Required = nil
	}
	return name
}

func (g *generator) fields(owner string, t reflect.Type, obj *Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		key, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && key == "" {
			g.fields(owner, f.Type, obj)
			continue
		}
		if key == "" {
			key = f.Name
		}
		var ft *Type
		if ref := f.Tag.Get("schema"); ref != "" {
			rt, ok := rawJSON[ref]
			if !ok {
				panic(fmt.Sprintf("apischema: %s.%s: no type %q in rawJSON", owner, f.Name, ref))
			}
			ft = &Type{Ref: "#/$defs/" + g.named(rt), Description: "on the CBOR wire, the JSON text as a byte string"}
		} else {
			ft = g.of(f.Type)
		}
		if vals, ok := enums[owner+"."+key]; ok {
			ft.Enum = vals
		}
		obj.Properties[key] = ft
		if !strings.Contains(opts, "omitempty") {
			obj.Required = append(obj.Required, key)
		}
	}
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	valueType = reflect.TypeFor[session.Value]()
)

// of returns the schema of a field's type.
func (g *generator) of(t reflect.Type) *Type {
	switch {
	case t == valueType:
		return &Type{Description: "any JSON value, kept byte for byte"}
	case t == timeType:
		return &Type{Type: "string", Format: "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := g.of(t.Elem())
		return &Type{AnyOf: []*Type{inner, {Type: "null"}}}
	case reflect.Struct:
		return &Type{Ref: "#/$defs/" + g.named(t)}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return &Type{Type: "string", ContentEncoding: "base64"}
		}
		return &Type{Type: "array", Items: g.of(t.Elem())}
	case reflect.Map:
		return &Type{Type: "object", AdditionalProperties: &Additional{Schema: g.of(t.Elem())}}
	case reflect.String:
		return &Type{Type: "string"}
	case reflect.Bool:
		return &Type{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &Type{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return &Type{Type: "number"}
	case reflect.Interface:
		return &Type{}
	}
	panic(fmt.Sprintf("apischema: no schema for %v", t))
}
