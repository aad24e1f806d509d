package recordlog

import (
	"hash/crc32"
	"testing"
)

// TestChecksumIsCRCOfKindAndPayload: a frame's checksum is the CRC-32C of
// its kind byte followed by its payload, whatever shortcut computes it
// (kindSums), so logs written before and after read alike.
func TestChecksumIsCRCOfKindAndPayload(t *testing.T) {
	payloads := [][]byte{nil, {0}, []byte("cairn"), make([]byte, 4097)}
	for k := range 256 {
		for _, p := range payloads {
			want := crc32.Checksum(append([]byte{byte(k)}, p...), crc32.MakeTable(crc32.Castagnoli))
			if got := checksum(byte(k), p); got != want {
				t.Fatalf("checksum(%d, %d bytes) = %#x, want %#x", k, len(p), got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = checksum('M', payloads[2]) }); n != 0 {
		t.Errorf("checksum allocates %v times", n)
	}
}
