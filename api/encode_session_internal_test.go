package api

import (
	"reflect"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

// TestResumeSessionParts checks that the structs ResumeSessionResult's
// AppendJSON encodes around the messages hold every other field of
// session.Snapshot and of ResumeSessionResult, in order, with the same
// types and tags: a field added to either and not to them fails here.
func TestResumeSessionParts(t *testing.T) {
	fields := func(ts ...reflect.Type) []reflect.StructField {
		var out []reflect.StructField
		for _, t := range ts {
			for i := range t.NumField() {
				f := t.Field(i)
				out = append(out, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
			}
		}
		return out
	}
	without := func(fs []reflect.StructField, name string) []reflect.StructField {
		return slices.DeleteFunc(fs, func(f reflect.StructField) bool { return f.Name == name })
	}
	for _, c := range []struct {
		whole reflect.Type
		skip  string
		parts []reflect.Type
	}{
		{reflect.TypeFor[session.Snapshot](), "Messages", []reflect.Type{reflect.TypeFor[snapshotHead](), reflect.TypeFor[snapshotTail]()}},
		{reflect.TypeFor[ResumeSessionResult](), "Snapshot", []reflect.Type{reflect.TypeFor[resumeRest]()}},
	} {
		if want, got := without(fields(c.whole), c.skip), fields(c.parts...); !reflect.DeepEqual(got, want) {
			t.Errorf("%v but %s:\n want %v\n  got %v", c.whole, c.skip, want, got)
		}
	}
	// Messages sits between the head and the tail.
	names := func(t reflect.Type) (out []string) {
		for i := range t.NumField() {
			out = append(out, t.Field(i).Name)
		}
		return out
	}
	if got := names(reflect.TypeFor[session.Snapshot]()); slices.Index(got, "Messages") != reflect.TypeFor[snapshotHead]().NumField() {
		t.Errorf("session.Snapshot's fields %v: Messages is not right after snapshotHead's", got)
	}
}
