package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/atomicfile"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, content := range []string{"one", "two, longer"} {
		if err := atomicfile.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q, %v; want %q", got, err, content)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

func TestWriteFileRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.WriteFile(link, []byte("new"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("replacing a symlink: %v", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "keep" {
		t.Fatalf("the link's target changed: %q", got)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

func TestEnsureDir(t *testing.T) {
	root := t.TempDir()
	made := filepath.Join(root, "made")
	if err := atomicfile.EnsureDir(made); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(made); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created dir: %v, %v", fi, err)
	}
	if err := os.Chmod(made, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.EnsureDir(made); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(made); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v after EnsureDir, want 0700", fi.Mode().Perm())
	}
	link := filepath.Join(root, "link")
	file := filepath.Join(root, "file")
	if err := os.Symlink(made, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, file} {
		if err := atomicfile.EnsureDir(p); !errors.Is(err, atomicfile.ErrNotDir) {
			t.Errorf("EnsureDir(%s) = %v, want ErrNotDir", filepath.Base(p), err)
		}
	}
}

// TestCreateFile checks that CreateFile returns the file under its final
// name, and that a failure at any step leaves nothing behind.
func TestCreateFile(t *testing.T) {
	for _, fail := range []string{"", atomicfile.StepWrite, atomicfile.StepSync, atomicfile.StepRename, atomicfile.StepAfterRename} {
		t.Run("fail="+fail, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			f, err := atomicfile.CreateFile(p, []byte("data"), 0o600, func(step string) error {
				if step == fail {
					return errors.New("injected")
				}
				return nil
			})
			entries, _ := os.ReadDir(dir)
			if fail != "" {
				if err == nil || f != nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), atomicfile.TempPrefix) {
					t.Fatalf("err %v, file %v", err, f)
				}
				if len(entries) != 0 {
					t.Fatalf("left behind: %v", entries)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Name() != p || len(entries) != 1 {
				t.Fatalf("file named %s, directory %v", f.Name(), entries)
			}
			if _, err := f.WriteAt([]byte("!"), 4); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); string(got) != "data!" {
				t.Fatalf("content %q", got)
			}
		})
	}
}
