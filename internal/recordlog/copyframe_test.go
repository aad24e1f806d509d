package recordlog_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/recordlog"
)

// TestCopyFrame: a frame is copied byte for byte through any size of
// buffer; a flipped byte, a wrong size or a short read fails it.
func TestCopyFrame(t *testing.T) {
	payload := strings.Repeat("payload-", 1000)
	log := append([]byte("lead"), recordlog.Append(nil, 'm', []byte(payload))...)
	size := len(log) - 4
	copyOf := func(data []byte, size, bufLen int) ([]byte, error) {
		var out []byte
		err := recordlog.CopyFrame(bytes.NewReader(data), "test.log", 4, size, make([]byte, bufLen), func(p []byte) error {
			out = append(out, p...)
			return nil
		})
		return out, err
	}
	for _, bufLen := range []int{recordlog.HeaderSize, 10, 4096, size, size + 100} {
		out, err := copyOf(log, size, bufLen)
		if err != nil || !bytes.Equal(out, log[4:]) {
			t.Fatalf("buffer of %d bytes: %v, copied %d of %d bytes", bufLen, err, len(out), size)
		}
	}
	flipped := bytes.Clone(log)
	flipped[len(flipped)-100] ^= 1
	if _, err := copyOf(flipped, size, 512); !errors.Is(err, recordlog.ErrDamaged) {
		t.Fatalf("a flipped byte: %v, want ErrDamaged", err)
	}
	if _, err := copyOf(log, size-1, 512); !errors.Is(err, recordlog.ErrDamaged) {
		t.Fatalf("a size that is not the frame's: %v, want ErrDamaged", err)
	}
	if _, err := copyOf(log[:len(log)-1], size, 512); err == nil || errors.Is(err, recordlog.ErrDamaged) {
		t.Fatalf("a short read: %v, want a read error", err)
	}
}
