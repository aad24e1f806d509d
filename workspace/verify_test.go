package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/workspace"
)

// TestVerifyManifests: the manifest files of a workspace check clean after
// recording, and a flipped byte in the log is reported with where the
// intact records end.
func TestVerifyManifests(t *testing.T) {
	root := t.TempDir()
	tr, err := workspace.Open(root, workspace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.go", i)), []byte(fmt.Sprint("package p // ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.RecordManifest(ctx); err != nil {
			t.Fatal(err)
		}
	}
	files, n, problems := tr.VerifyManifests()
	if files == 0 || n == 0 || len(problems) != 0 {
		t.Fatalf("clean store: %d files, %d bytes, problems %+v", files, n, problems)
	}
	logs, _ := filepath.Glob(filepath.Join(root, ".cairn", "manifests", "log-*.bin"))
	if len(logs) == 0 {
		t.Fatal("no manifest log")
	}
	data, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(logs[len(logs)-1], data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, problems = tr.VerifyManifests()
	if len(problems) != 1 || problems[0].Kind != "manifest" || problems[0].State != "corrupt" || problems[0].Offset <= 0 || problems[0].Offset >= int64(len(data)) {
		t.Fatalf("after a flipped byte: %+v", problems)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}
