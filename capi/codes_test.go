//go:build cgo

package main

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/api"
)

// TestReturnCodes checks that every wire code has a return code of its own
// and that each is the number cairn.h documents for it.
func TestReturnCodes(t *testing.T) {
	h, err := os.ReadFile("cairn.h")
	if err != nil {
		t.Fatal(err)
	}
	header := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define CAIRN_E_\w+\s+(-\d+)\s+/\* "(\w+)"`).FindAllStringSubmatch(string(h), -1) {
		n, _ := strconv.Atoi(m[1])
		header[m[2]] = n
	}
	seen := map[int]string{}
	for code, rc := range codes {
		if header[code] != rc {
			t.Errorf("%s: codes has %d, cairn.h %d", code, rc, header[code])
		}
		if prev, dup := seen[rc]; dup {
			t.Errorf("%s and %s share return code %d", code, prev, rc)
		}
		seen[rc] = code
	}
	for _, c := range api.Codes() {
		if _, ok := codes[string(c)]; !ok {
			t.Errorf("wire code %s has no return code", c)
		}
	}
	for _, c := range []string{"corrupt", "no_space"} {
		if _, ok := header[c]; !ok {
			t.Errorf("cairn.h documents no return code for %s", c)
		}
	}
}
