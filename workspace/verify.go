package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/session"
)

// VerifyManifests reads and checks every base and log file of the manifest
// store (engine.ManifestVerifier): each base's checksum and decoding, and
// each log's records up to its end, in sequence. It returns how many files
// it read, their bytes, and a problem for each that does not check.
func (t *Tracker) VerifyManifests() (files int, bytes int64, problems []session.Problem) {
	t.mmu.Lock()
	defer t.mmu.Unlock()
	if t.isClosed() {
		return 0, 0, nil
	}
	ms := t.ms
	bad := func(path string, at, size int64, err error) {
		problems = append(problems, session.Problem{Kind: "manifest", ID: filepath.Base(path), Path: path, State: "corrupt", Offset: at, Size: size, Message: err.Error()})
	}
	for _, base := range ms.bases {
		if base > 0 {
			p := ms.path("base", base)
			files++
			if fi, err := ms.fs.Lstat(p); err == nil {
				bytes += fi.Size()
			}
			if _, err := ms.readBase(base); err != nil {
				bad(p, -1, -1, err)
			}
		}
		lp := ms.path("log", base)
		data, err := vfs.ReadFile(ms.fs, lp)
		if err != nil {
			// Only the newest base is sure to have a log: a crash
			// between a base and its log leaves none for an older one.
			if base == ms.bases[len(ms.bases)-1] || !errors.Is(err, os.ErrNotExist) {
				bad(lp, -1, -1, err)
			}
			continue
		}
		files++
		bytes += int64(len(data))
		if base == ms.bases[len(ms.bases)-1] && ms.cur != nil {
			data = data[:min(int64(len(data)), ms.cur.Size())]
		}
		valid, err := scanLog(data, base, func(uint64, []mop) bool { return true })
		switch {
		case err != nil:
			bad(lp, 0, int64(len(data)), err)
		case valid < len(data):
			bad(lp, int64(valid), int64(len(data)), fmt.Errorf("%s: the records fail their checks from byte %d of %d: %w", lp, valid, len(data), ErrCorrupt))
		}
	}
	return files, bytes, problems
}
