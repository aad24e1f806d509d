package fsstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/cairn-dev/cairn/internal/atomicfile"
)

// maxPlainName bounds a readable escaped file name; longer ids are hashed so
// no name exceeds NAME_MAX (255 bytes) on any common file system.
const maxPlainName = 160

// fileName maps an id to a log file name inside one store directory. The
// mapping is injective and the result never contains '/', never is "." or
// "..", and never starts with '.', so no id (however hostile: "../x",
// "a/b", unicode, 256 bytes) can name a file outside the directory or
// collide with temp and tombstone files (which start with '.').
//
// Readable ids become "s-" + escaped id, where bytes outside [A-Za-z0-9_-]
// are written as %XX. Ids whose escaped form is too long become
// "h-" + hex(sha256(id)). The two prefixes keep the two forms apart.
func fileName(id string) string {
	var b strings.Builder
	b.WriteString("s-")
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			const hexdig = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hexdig[c>>4])
			b.WriteByte(hexdig[c&15])
		}
		if b.Len() > maxPlainName {
			sum := sha256.Sum256([]byte(id))
			return "h-" + hex.EncodeToString(sum[:]) + logSuffix
		}
	}
	b.WriteString(logSuffix)
	return b.String()
}

const (
	logSuffix     = ".log"
	tempPrefix    = atomicfile.TempPrefix
	deletedPrefix = ".del-"
)
