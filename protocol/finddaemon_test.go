package protocol_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/protocol"
)

// TestFindDaemonOrder: explicit, then $CAIRN_DAEMON, then next to the
// loaded libcairn (SetLibraryPath), then next to the executable, then PATH.
// The test binary's own directory holds no cairnd, so "next to the
// executable" is covered by its absence from the error's list only.
func TestFindDaemonOrder(t *testing.T) {
	t.Cleanup(func() { protocol.SetLibraryPath("") })
	exe := func(dir string) string {
		t.Helper()
		p := filepath.Join(dir, "cairnd")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	libDir, pathDir, emptyDir := t.TempDir(), t.TempDir(), t.TempDir()
	libBin, pathBin := exe(libDir), exe(pathDir)
	lib := filepath.Join(libDir, "libcairn.so")

	tests := []struct {
		name     string
		explicit string
		env      string
		lib      string
		path     string
		want     string
		wantErr  bool
	}{
		{name: "explicit first", explicit: "/x/cairnd", env: "/y/cairnd", lib: lib, path: pathDir, want: "/x/cairnd"},
		{name: "env before library", env: "/y/cairnd", lib: lib, path: pathDir, want: "/y/cairnd"},
		{name: "library before PATH", lib: lib, path: pathDir, want: libBin},
		{name: "PATH last", lib: filepath.Join(emptyDir, "libcairn.so"), path: pathDir, want: pathBin},
		{name: "no library: PATH", path: pathDir, want: pathBin},
		{name: "nowhere", lib: filepath.Join(emptyDir, "libcairn.so"), path: emptyDir, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(protocol.DaemonEnv, tc.env)
			t.Setenv("PATH", tc.path)
			protocol.SetLibraryPath(tc.lib)
			got, tried, err := protocol.FindDaemon(tc.explicit)
			if tc.wantErr {
				if !errors.Is(err, protocol.ErrNoDaemon) {
					t.Fatalf("FindDaemon = %q, %v; want ErrNoDaemon", got, err)
				}
				want := []string{"$CAIRN_DAEMON (unset)", filepath.Join(emptyDir, "cairnd")}
				if len(tried) < 3 || tried[0] != want[0] || tried[1] != want[1] || tried[len(tried)-1] != "cairnd on $PATH" {
					t.Fatalf("tried %q; want %q, then next to the executable, then PATH", tried, want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FindDaemon = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestSetLibraryPathAbsolute: a relative path (as dladdr gives for a
// relative dlopen) is made absolute when recorded.
func TestSetLibraryPathAbsolute(t *testing.T) {
	t.Cleanup(func() { protocol.SetLibraryPath("") })
	protocol.SetLibraryPath("lib/libcairn.so")
	wd, _ := os.Getwd()
	if got, want := protocol.LibraryPath(), filepath.Join(wd, "lib", "libcairn.so"); got != want {
		t.Fatalf("LibraryPath = %q, want %q", got, want)
	}
}
