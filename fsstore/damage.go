package fsstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// What Open does with a log whose bytes do not all read back.
//
// A torn tail is the end of the last append, cut short by a crash: no
// intact commit record follows the point where the intact commits end. An
// append is acknowledged only once it is whole and synced, so a torn tail
// was never acknowledged; Open trims it, after copying its bytes to
// quarantine/.
//
// Damage is anything else: bytes that fail their checksum, or records that
// break a commit, with an intact commit record of a later generation after
// them. Appends are sequential and each is synced before the next begins,
// so that later commit was acknowledged, and so was everything before it:
// trimming would destroy acknowledged data. Open leaves such a log exactly
// as it is and does not serve it: every call that names the session (or a
// run it records, or a workflow) answers code corrupt, List shows it with
// its state, Verify reports it, and Repair (which the user confirms) keeps
// what can be proven intact and moves the original bytes to quarantine/.
//
// A record that reads back intact but was written by a newer cairn (a
// commit of a newer schema, a record kind this build does not know) makes
// the log unsupported the same way: kept, listed, and answered with
// schema_unsupported. A log that cannot be opened at all (permissions, an
// immutable flag, a symlink, not a regular file) is unreadable: listed,
// and answered with the error that opening it gave. In every case the other
// sessions are served.

// Session states, as List reports them (session.Summary.State). A
// healthy session has none.
const (
	StateCorrupt     = string(session.CodeCorrupt)
	StateUnsupported = string(session.CodeSchemaUnsupported)
	StateUnreadable  = "unreadable"
)

// maxCommitFrame bounds the framed size of a commit record; the damage scan
// looks only for frames this small.
const maxCommitFrame = 256

// commitSeen is a commit record found past the end of a log's intact
// commits: its generation, where its frame ends, and whether the records
// its commit record counts are all there and intact before it.
type commitSeen struct {
	gen        uint64
	start, end int64
	intact     bool
}

// commitsAfter finds every commit record whose frame checks, in the bytes
// off..size of r, and checks the records each one closes. It reads a
// bounded amount at a time.
func commitsAfter(r io.ReaderAt, off, size int64) ([]commitSeen, error) {
	const chunk = 1 << 20
	var out []commitSeen
	buf := make([]byte, chunk+maxCommitFrame)
	for base := off; base < size; base += chunk {
		b := buf[:min(int64(len(buf)), size-base)]
		if n, err := r.ReadAt(b, base); n < len(b) {
			return nil, fmt.Errorf("read at %d: %w", base, err)
		}
		for p := 0; p < min(chunk, len(b)-recordlog.HeaderSize+1); p++ {
			if b[p+8] != kindCommit {
				continue
			}
			rec, ok := recordlog.FrameAt(b[p:min(len(b), p+maxCommitFrame)], base+int64(p))
			if !ok {
				continue
			}
			var c commitRec
			if decMode.Unmarshal(rec.Payload, &c) != nil || c.Generation == 0 || c.Bytes < 0 {
				continue
			}
			at := base + int64(p)
			seen := commitSeen{gen: c.Generation, start: at - c.Bytes, end: rec.End}
			if seen.start >= off {
				count := 0
				end, err := recordlog.Walk(r, seen.start, at, func(byte) bool { return false }, func(recordlog.Record) bool {
					count++
					return true
				})
				if err != nil {
					return nil, err
				}
				seen.intact = end == at && count == c.Records
			}
			out = append(out, seen)
		}
	}
	return out, nil
}

// laterCommits returns the commits in seen of a generation after gen.
func laterCommits(seen []commitSeen, gen uint64) []commitSeen {
	var out []commitSeen
	for _, c := range seen {
		if c.gen > gen {
			out = append(out, c)
		}
	}
	return out
}

// runsIn returns the run ids named by the intact run and checkpoint
// records in the byte ranges given (pairs of start, end) of r. A damaged or
// newer log is not served, but a run it records must not pass for unknown.
func runsIn(r io.ReaderAt, ranges [][2]int64) map[string]bool {
	runs := map[string]bool{}
	for _, rg := range ranges {
		_, _ = recordlog.Walk(r, rg[0], rg[1], func(kind byte) bool { return kind == kindRun || kind == kindCheckpoint }, func(rec recordlog.Record) bool {
			var v struct {
				RunID string `cbor:"run_id"`
			}
			if rec.Payload != nil && decMode.Unmarshal(rec.Payload, &v) == nil && v.RunID != "" {
				runs[v.RunID] = true
			}
			return true
		})
	}
	return runs
}

// idFromName recovers the id a log file name was made from (fileName), or
// "" for a hashed name.
func idFromName(name string) string {
	esc, ok := strings.CutPrefix(strings.TrimSuffix(name, logSuffix), "s-")
	if !ok {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(esc); i++ {
		if esc[i] == '%' && i+2 < len(esc) {
			var c byte
			if _, err := fmt.Sscanf(esc[i+1:i+3], "%02X", &c); err != nil {
				return ""
			}
			b.WriteByte(c)
			i += 2
			continue
		}
		b.WriteByte(esc[i])
	}
	if fileName(b.String()) != name {
		return ""
	}
	return b.String()
}

// firstResetID reads the session id from the reset record that opens a
// session log, when that record is intact.
func firstResetID(r io.ReaderAt, size int64) string {
	var id string
	_, _ = recordlog.Walk(r, int64(len(logMagic)), size, func(kind byte) bool { return kind == kindReset }, func(rec recordlog.Record) bool {
		var rr resetRec
		if rec.Kind == kindReset && decMode.Unmarshal(rec.Payload, &rr) == nil {
			id = rr.SessionID
		}
		return false
	})
	return id
}

// errDamaged is the error every call on a damaged log answers.
func errDamaged(what, id, path string, at, size int64, good uint64, later []commitSeen) error {
	last := later[len(later)-1].gen
	return session.Errorf(session.CodeCorrupt,
		"%s %q is damaged: its log %s fails its checks at byte %d of %d, and %d intact commit(s) up to generation %d follow; "+
			"generations after %d cannot be read. Nothing was trimmed or changed. See `cairn verify`; `cairn repair %s` keeps what is intact",
		what, id, path, at, size, len(later), last, good, id)
}

// quarantineName is a fresh name in quarantine/ for what is kept of the
// log file name: the name, the time, and what it is.
func (s *Store) quarantineName(name, what string) string {
	return filepath.Join(layout.Quarantine(s.root), fmt.Sprintf("%s.%s.%s", name, s.opts.Now().UTC().Format("20060102T150405.000000000Z"), what))
}

// trimTorn trims the torn tail of the log l (file name) from valid on, at
// recovery, after copying its bytes to a new file in quarantine/: a torn
// tail is never acknowledged data, but it is never destroyed either. The
// error is what the log is refused with when that fails.
func (s *Store) trimTorn(l *recordlog.File, name string, valid int64) error {
	size := l.Size()
	dst, err := s.copyToQuarantine(l, name, valid, size, fmt.Sprintf("tail-at-%d", valid))
	if err == nil {
		s.log.Warn("trimming torn or uncommitted log tail", "path", l.Path(), "bytes", size-valid, "kept_in", dst)
		err = l.Truncate(valid)
	}
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "log %s ends in a torn tail at byte %d that could not be kept and trimmed", l.Path(), valid)
	}
	s.trimmed.Add(size - valid)
	return nil
}

// setAside moves a log (at path in dir, closed) that holds no intact
// commit to quarantine/, at recovery. The error is what the log is refused
// with when that fails.
func (s *Store) setAside(dir, path, name string) error {
	dst, err := s.moveToQuarantine(dir, path, name, "no-commit", false)
	if err != nil {
		return session.Wrap(session.CodeCorrupt, err, "log %s holds no intact commit, and moving it to quarantine failed", path)
	}
	s.log.Warn("moved a log with no intact commit to quarantine", "path", path, "to", dst)
	return nil
}

// copyToQuarantine copies the bytes off..size of r (the log name) to a new
// file in quarantine/, durably (written, synced, renamed into place, the
// directory synced), and returns its path.
func (s *Store) copyToQuarantine(r io.ReaderAt, name string, off, size int64, what string) (string, error) {
	if err := s.ensureDir(layout.Quarantine(s.root)); err != nil {
		return "", err
	}
	dst := s.quarantineName(name, what)
	t, err := atomicfile.NewTempFS(s.fs, dst, 0o600, nil)
	if err != nil {
		return "", err
	}
	defer t.Abort()
	buf := make([]byte, max(min(size-off, 1<<20), 1))
	for done := int64(0); done < size-off; {
		part := buf[:min(int64(len(buf)), size-off-done)]
		if n, err := r.ReadAt(part, off+done); n < len(part) {
			return "", fmt.Errorf("read tail of %s: %w", name, err)
		}
		if err := t.WriteAt(part, done); err != nil {
			return "", err
		}
		done += int64(len(part))
	}
	if err := t.Sync(); err != nil {
		return "", err
	}
	f, err := t.Create()
	if err != nil {
		return "", err
	}
	f.Close()
	return dst, nil
}

// moveToQuarantine moves the log at path (in dir) into quarantine/ and
// syncs quarantine/, so it is kept; with syncFrom it also syncs dir, so it
// is out of the store's way for good (a delete). Recovery does not need
// that: if the old name comes back after a crash, the next recovery moves
// it aside again.
func (s *Store) moveToQuarantine(dir, path, name, what string, syncFrom bool) (string, error) {
	if err := s.ensureDir(layout.Quarantine(s.root)); err != nil {
		return "", err
	}
	dst := s.quarantineName(name, what)
	// A link, made durable, then the old name's removal: a rename across
	// directories could lose the file if the removal reached the disk and
	// the new name did not.
	if err := s.fs.Link(path, dst); err != nil {
		return "", err
	}
	if err := s.fs.SyncDir(layout.Quarantine(s.root)); err != nil {
		return dst, err
	}
	if err := s.fs.Remove(path); err != nil {
		return dst, err
	}
	if !syncFrom {
		return dst, nil
	}
	return dst, s.fs.SyncDir(dir)
}

// Quarantined lists the files in quarantine/, oldest name first.
func (s *Store) Quarantined() ([]string, error) {
	entries, err := s.fs.ReadDir(layout.Quarantine(s.root))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			out = append(out, filepath.Join(layout.Quarantine(s.root), e.Name()))
		}
	}
	return out, nil
}
