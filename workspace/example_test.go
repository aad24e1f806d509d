package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/workspace"
)

// Example records a manifest, as a session commit would, then reports the
// files changed since, as a resume would.
func Example() {
	root, _ := os.MkdirTemp("", "cairn-example-")
	defer os.RemoveAll(root)
	os.WriteFile(filepath.Join(root, "main.go"), []byte("package main\n"), 0o644)

	tr, err := workspace.Open(root, workspace.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	ctx := context.Background()
	ref, err := tr.RecordManifest(ctx) // store ref in the session's snapshot.Files
	if err != nil {
		fmt.Println(err)
		return
	}

	os.WriteFile(filepath.Join(root, "main.go"), []byte("package main // edited\n"), 0o644)
	os.WriteFile(filepath.Join(root, "new.go"), []byte("package main\n"), 0o644)

	drift, err := tr.Diff(ctx, ref, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("added:", drift.Added, "modified:", drift.Modified, "deleted:", drift.Deleted)
	// Output: added: [new.go] modified: [main.go] deleted: []
}
