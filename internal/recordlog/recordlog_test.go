package recordlog_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/internal/recordlog"
)

const magic = "TESTLOG1"

func frames(t *testing.T, payloads ...string) ([]byte, []int64) {
	t.Helper()
	buf := []byte(magic)
	var ends []int64
	for i, p := range payloads {
		buf = recordlog.Append(buf, byte('a'+i), []byte(p))
		ends = append(ends, int64(len(buf)))
	}
	return buf, ends
}

func scanAll(data []byte) ([]recordlog.Record, int64) {
	var got []recordlog.Record
	end := recordlog.Scan(data, int64(len(magic)), func(r recordlog.Record) bool {
		got = append(got, r)
		return true
	})
	return got, end
}

func TestScanRoundTrip(t *testing.T) {
	data, ends := frames(t, "one", "", "three")
	if !recordlog.HasMagic(data, magic) || recordlog.HasMagic(data, "OTHERLOG") {
		t.Fatal("HasMagic")
	}
	got, end := scanAll(data)
	if end != int64(len(data)) || len(got) != 3 {
		t.Fatalf("scanned %d records to %d of %d", len(got), end, len(data))
	}
	for i, want := range []string{"one", "", "three"} {
		if got[i].Kind != byte('a'+i) || string(got[i].Payload) != want || got[i].End != ends[i] || got[i].Size != recordlog.HeaderSize+int64(len(want)) {
			t.Errorf("record %d: %+v", i, got[i])
		}
	}
	// The callback refusing a record ends the valid data before it.
	n := 0
	end = recordlog.Scan(data, int64(len(magic)), func(recordlog.Record) bool { n++; return n < 2 })
	if end != ends[0] {
		t.Fatalf("refused second record: end %d, want %d", end, ends[0])
	}
}

// TestScanStopsAtDamage cuts the log at every byte and flips every byte:
// the valid end is always the end of the last whole, intact frame before
// the damage.
func TestScanStopsAtDamage(t *testing.T) {
	data, ends := frames(t, "first record", "second", "third one")
	lastBefore := func(off int64) int64 {
		valid := int64(len(magic))
		for _, e := range ends {
			if e <= off {
				valid = e
			}
		}
		return valid
	}
	for cut := int64(len(magic)); cut <= int64(len(data)); cut++ {
		if _, end := scanAll(data[:cut]); end != lastBefore(cut) {
			t.Fatalf("cut at %d: end %d, want %d", cut, end, lastBefore(cut))
		}
	}
	for i := len(magic); i < len(data); i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		if _, end := scanAll(bad); end > lastBefore(int64(i)) {
			t.Fatalf("flip at %d: end %d past the damage (want <= %d)", i, end, lastBefore(int64(i)))
		}
	}
}

func TestAppendRollsBackAndNamesThePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	first, _ := frames(t, "one")
	l, err := recordlog.Create(path, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "x.log" {
		t.Fatalf("directory after Create: %v", entries)
	}
	rec := recordlog.Append(nil, 'z', []byte("appended"))
	for _, step := range []string{recordlog.StepWrite, recordlog.StepAfterWrite, recordlog.StepSync, recordlog.StepAfterSync} {
		t.Run(step, func(t *testing.T) {
			broken, err := l.Append(rec, func(s string) error {
				if s == step {
					return syscall.ENOSPC
				}
				return nil
			})
			if broken || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Append with %s failing: broken %v, err %v", step, broken, err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, first) || l.Size() != int64(len(first)) {
				t.Fatalf("not rolled back: %d bytes on disk, size %d, want %d", len(got), l.Size(), len(first))
			}
		})
	}
	if broken, err := l.Append(rec, nil); broken || err != nil {
		t.Fatal(broken, err)
	}
	l2, data, err := recordlog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got, end := scanAll(data); len(got) != 2 || end != int64(len(data)) || l2.Size() != end {
		t.Fatalf("reopened: %d records, end %d, size %d", len(got), end, l2.Size())
	}
	// Recovery trims a torn tail for good.
	if _, err := l2.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l2.Truncate(int64(len(first))); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != int64(len(first)) {
		t.Fatalf("size after Truncate: %d", fi.Size())
	}
}
