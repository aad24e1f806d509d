//go:build cgo

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// TestEmbeddedPostgresStore: two embedded handles on two workspace folders
// share sessions through cairn_open's "store" option; the workspace lock
// stays local, and a store that is not a postgres:// URL is refused.
func TestEmbeddedPostgresStore(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("capi")
	wsA, wsB := t.TempDir(), t.TempDir()
	a, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"store":%q}`, wsA, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(a, "save", []byte(`{"session_id":"shared","change":{"append_messages":[{"from":"a"}]}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"store":%q}`, wsA, url)); codeOf(err) != "locked" {
		t.Fatalf("a second embedded open of workspace A: %v, want locked", err)
	}
	if err := closeHandle(a); err != nil {
		t.Fatal(err)
	}
	b, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"store":%q}`, wsB, url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeHandle(b) })
	out, err := call(b, "messages", []byte(`{"session_id":"shared"}`))
	if err != nil || !strings.Contains(string(out), `"from":"a"`) {
		t.Fatalf("workspace B reads %s, %v; want A's message", out, err)
	}
	if _, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true,"store":"/some/folder"}`, t.TempDir())); codeOf(err) != "invalid_argument" {
		t.Fatalf("a store that is not a URL: %v, want invalid_argument", err)
	}
}
