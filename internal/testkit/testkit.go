// Package testkit holds the helpers that tests of several packages share.
// Only tests import it.
package testkit

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Timeout bounds a test's Context.
const Timeout = 30 * time.Second

// Context returns a context that ends when the test does, or after Timeout.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// WriteFile writes content to the slash-separated path rel under root,
// creating the directories on the way; a failure ends the test.
func WriteFile(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
