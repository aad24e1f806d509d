package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/testkit"
)

func TestIgnoreMatcher(t *testing.T) {
	gitignore := []string{
		"# comment",
		"*.log",
		"!keep.log",
		"build/",
		"/root-only.txt",
		"docs/**/*.tmp",
		"**/cache",
		"a/**",
		`\#literal`,
		"trailing   ",
		"[",
	}
	rules, bad := parseIgnore(gitignore)
	if len(bad) != 1 || bad[0] != "[" {
		t.Fatalf("bad patterns = %q, want [\"[\"]", bad)
	}
	m := matcher{rules: rules}
	cases := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"x.log", false, true},
		{"deep/dir/x.log", false, true},
		{"keep.log", false, false},
		{"deep/keep.log", false, false},
		{"build", true, true},
		{"src/build", true, true},
		{"build", false, false}, // a file named build: the rule is for directories
		{"root-only.txt", false, true},
		{"sub/root-only.txt", false, false},
		{"docs/x.tmp", false, true},
		{"docs/a/b/x.tmp", false, true},
		{"other/x.tmp", false, false},
		{"cache", true, true},
		{"p/q/cache", false, true},
		{"a", true, false},
		{"a/anything", false, true},
		{"#literal", false, true},
		{"trailing", false, true},
		{"node_modules", true, true},
		{"pkg/node_modules", true, true},
		{"node_modules", false, false},
		{".git", false, true},
		{".git", true, true},
		{"x/__pycache__", true, true},
		{"target", true, true},
		{".cairn", true, true},
		{"src/main.go", false, false},
	}
	for _, tc := range cases {
		if got := m.ignored(tc.path, tc.isDir); got != tc.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", tc.path, tc.isDir, got, tc.want)
		}
	}
	if !m.ignoredPath("build/out/x.go", false) || m.ignoredPath("src/x.go", false) {
		t.Error("ignoredPath does not look at ancestors")
	}
}

func FuzzIgnoreMatcher(f *testing.F) {
	f.Add("*.log\n!keep.log\nbuild/", "deep/x.log", false)
	f.Add("docs/**/*.tmp", "docs/a/b/x.tmp", false)
	f.Add("a/**/b/**", "a/b/c", true)
	f.Add("[", "x", false)
	f.Fuzz(func(t *testing.T, patterns, path string, isDir bool) {
		if path == "" {
			return
		}
		rules, _ := parseIgnore(strings.Split(patterns, "\n"))
		m := matcher{rules: rules}
		_ = m.ignored(path, isDir) // must not panic or hang
		_ = m.ignoredPath(path, isDir)
	})
}

// TestIgnoreRulesInTree checks the built-in, .gitignore and configured rules
// on a real tree, and that ignored directories get no watch.
func TestIgnoreRulesInTree(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, ".gitignore", "*.log\n!keep.log\nbuild/\n/dist\n")
	files := map[string]bool{
		"src/main.go":             true,
		"src/x.log":               false,
		"keep.log":                true,
		"build/out.bin":           false,
		"src/build/out.bin":       false,
		"dist/app.js":             false,
		"src/dist/app.js":         true,
		"node_modules/lib/i.js":   false,
		"pkg/node_modules/i.js":   false,
		"target/debug/bin":        false,
		"py/__pycache__/m.pyc":    false,
		".git/HEAD":               false,
		"secrets/token":           false,
		"notes/private.md":        false,
		"notes/public.md":         true,
		".cairn/sessions/ignored": false,
	}
	for f := range files {
		testkit.WriteFile(t, root, f, f)
	}
	tr := openT(t, root, Options{Ignore: []string{"secrets/", "notes/*", "!notes/public.md"}})
	for f, want := range files {
		if _, got := tr.Lookup(f); got != want {
			t.Errorf("Lookup(%q) = %v, want %v", f, got, want)
		}
	}
	if _, ok := tr.Lookup(".gitignore"); !ok {
		t.Error(".gitignore itself is not indexed")
	}
	// Watched: root, .cairn (cookies), src, src/dist, py, pkg, notes.
	tr.mu.Lock()
	var watched []string
	for p, d := range tr.dirs {
		if d.watched {
			watched = append(watched, p)
		}
	}
	tr.mu.Unlock()
	sortStrings(watched)
	want := []string{"", "notes", "pkg", "py", "src", "src/dist"}
	if !eqList(watched, want) || tr.Status().Watches != len(want)+1 {
		t.Fatalf("watched dirs = %q (%d watches), want %q + .cairn", watched, tr.Status().Watches, want)
	}
	// Changes inside ignored directories are not reported.
	since := tr.Clock()
	testkit.WriteFile(t, root, "node_modules/lib/new.js", "x")
	testkit.WriteFile(t, root, "build/new.bin", "x")
	testkit.WriteFile(t, root, "src/y.log", "x")
	testkit.WriteFile(t, root, "src/z.go", "x")
	wantChanges(t, changesT(t, tr, since), []string{"src/z.go"}, nil, nil)

	// Editing .gitignore applies the new rules to the index.
	since = tr.Clock()
	testkit.WriteFile(t, root, ".gitignore", "*.log\n!keep.log\n/dist\n")
	cs := changesT(t, tr, since)
	wantChanges(t, cs, []string{"build/new.bin", "build/out.bin", "src/build/out.bin"}, []string{".gitignore"}, nil)
	if err := os.RemoveAll(filepath.Join(root, "build")); err != nil {
		t.Fatal(err)
	}
	syncT(t, tr)
}
