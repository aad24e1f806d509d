// Package crashfs is a vfs.FS for power-cut tests, in the manner of
// SQLite's crash-test VFS and CrashMonkey. It passes every operation to
// the real file system under a root directory and keeps, beside it, a
// model of what is durable, POSIX-strictly:
//
//   - a file's content and size are durable as of its last Sync
//     (fdatasync); the writes and truncates since are pending;
//   - a directory's entries are durable as of its last SyncDir; the
//     creates, renames and removes since are pending, so a new file's
//     name is durable only once its directory is synced.
//
// Cut materialises the durable image in a fresh directory: the power cut.
// In mode SyncedOnly it keeps only synced state; in mode Random it also
// keeps, as real disks may, a random subset of each file's pending writes
// (each kept whole, dropped, or torn at a 512-byte sector boundary, the
// torn part missing or zeroed) and a random prefix of each directory's
// pending operations.
//
// Every Sync and SyncDir is attributed to a sync site, the code that asked
// for it (see Site), so a test can list the sites a workload reaches and
// turn one into a no-op (Disable) to show that the guarantees need it. A
// Presync is modelled as a Sync at a site of its own (PresyncSite), which
// Mutate does not turn off: nothing may rely on it.
package crashfs

import (
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/internal/vfs"
)

// Mode chooses what Cut keeps beyond the synced state.
type Mode int

const (
	// SyncedOnly keeps exactly what was synced.
	SyncedOnly Mode = iota
	// Random also keeps a random part of what was not.
	Random
)

// Sector is the granularity at which Cut tears a write.
const Sector = 512

type opKind int

const (
	opWrite opKind = iota
	opTruncate
	opLink   // name -> ino
	opUnlink // name
	opRename // name -> to (same directory)
)

type op struct {
	kind     opKind
	off      int64
	data     []byte
	name, to string
	ino      int
}

type inode struct {
	dir  bool
	mode fs.FileMode
	// files
	synced  []byte
	pending []op
	// directories
	entries  map[string]int // durable
	cur      map[string]int // current
	dpending []op
}

// FS is the crash-modelling file system. Use New.
type FS struct {
	root string

	mu       sync.Mutex
	inodes   []*inode
	sites    []string
	seen     map[string]bool
	disabled string
	hook     func(site string)
	inHook   bool
}

var _ vfs.FS = (*FS)(nil)

// New returns an FS over the directory root, whose present content (files
// and directories, recursively) counts as durable.
func New(root string) (*FS, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	c := &FS{root: root, seen: map[string]bool{}}
	ino, err := c.snapshot(root)
	if err != nil {
		return nil, err
	}
	if ino != 0 || !c.inodes[0].dir {
		return nil, fmt.Errorf("crashfs: %s is not a directory", root)
	}
	return c, nil
}

// snapshot adds the tree at path as durable and returns its inode.
func (c *FS) snapshot(path string) (int, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	ino := len(c.inodes)
	n := &inode{mode: fi.Mode().Perm()}
	c.inodes = append(c.inodes, n)
	switch {
	case fi.IsDir():
		n.dir, n.entries, n.cur = true, map[string]int{}, map[string]int{}
		des, err := os.ReadDir(path)
		if err != nil {
			return 0, err
		}
		for _, de := range des {
			child, err := c.snapshot(filepath.Join(path, de.Name()))
			if err != nil {
				return 0, err
			}
			n.entries[de.Name()], n.cur[de.Name()] = child, child
		}
	case fi.Mode().IsRegular():
		if n.synced, err = os.ReadFile(path); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("crashfs: %s: only files and directories are modelled", path)
	}
	return ino, nil
}

// Root returns the directory the FS works in.
func (c *FS) Root() string { return c.root }

// rel splits name into the path components below the root.
func (c *FS) rel(name string) ([]string, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	r, err := filepath.Rel(c.root, abs)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return nil, fmt.Errorf("crashfs: %s is outside %s", name, c.root)
	}
	if r == "." {
		return nil, nil
	}
	return strings.Split(r, "/"), nil
}

// lookup resolves name in the current tree: its parent directory's inode,
// its base name, and its own inode (-1 when absent). c.mu is held.
func (c *FS) lookup(name string) (parent int, base string, ino int, err error) {
	parts, err := c.rel(name)
	if err != nil {
		return 0, "", 0, err
	}
	if len(parts) == 0 {
		return -1, "", 0, nil
	}
	dir := 0
	for _, p := range parts[:len(parts)-1] {
		next, ok := c.inodes[dir].cur[p]
		if !ok || !c.inodes[next].dir {
			return 0, "", 0, fmt.Errorf("crashfs: %s: parent not modelled", name)
		}
		dir = next
	}
	base = parts[len(parts)-1]
	ino, ok := c.inodes[dir].cur[base]
	if !ok {
		ino = -1
	}
	return dir, base, ino, nil
}

func (c *FS) newInode(dir bool, perm fs.FileMode) int {
	n := &inode{dir: dir, mode: perm}
	if dir {
		n.entries, n.cur = map[string]int{}, map[string]int{}
	}
	c.inodes = append(c.inodes, n)
	return len(c.inodes) - 1
}

func (c *FS) dirOp(dir int, o op) {
	d := c.inodes[dir]
	d.dpending = append(d.dpending, o)
	applyDirOp(d.cur, o)
}

func applyDirOp(m map[string]int, o op) {
	switch o.kind {
	case opLink:
		m[o.name] = o.ino
	case opUnlink:
		delete(m, o.name)
	case opRename:
		if ino, ok := m[o.name]; ok {
			delete(m, o.name)
			m[o.to] = ino
		}
	}
}

// OpenFile opens name on the real file system and models a creation
// (O_CREATE of a new name) and a truncation (O_TRUNC).
func (c *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	parent, base, ino, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if ino < 0 {
		if flag&os.O_CREATE == 0 || parent < 0 {
			f.Close()
			return nil, fmt.Errorf("crashfs: %s exists but was not made through the FS", name)
		}
		ino = c.newInode(false, perm)
		c.dirOp(parent, op{kind: opLink, name: base, ino: ino})
	}
	if c.inodes[ino].dir {
		return &file{c: c, f: f, ino: ino}, nil
	}
	if flag&os.O_TRUNC != 0 {
		c.inodes[ino].pending = append(c.inodes[ino].pending, op{kind: opTruncate})
	}
	return &file{c: c, f: f, ino: ino}, nil
}

// Rename renames on the real file system and models it: within a
// directory, one atomic operation; across directories, a link in the new
// one and an unlink in the old one, each durable with its own directory.
func (c *FS) Rename(oldpath, newpath string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	op1, ob, oino, err := c.lookup(oldpath)
	if err != nil {
		return err
	}
	np, nb, _, err := c.lookup(newpath)
	if err != nil {
		return err
	}
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	if oino < 0 {
		return fmt.Errorf("crashfs: renamed %s, which was not made through the FS", oldpath)
	}
	if op1 == np {
		c.dirOp(op1, op{kind: opRename, name: ob, to: nb})
		return nil
	}
	c.dirOp(np, op{kind: opLink, name: nb, ino: oino})
	c.dirOp(op1, op{kind: opUnlink, name: ob})
	return nil
}

// Link makes newname a second name of oldname's file on the real file
// system and models the new entry, durable with its directory.
func (c *FS) Link(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, oino, err := c.lookup(oldname)
	if err != nil {
		return err
	}
	np, nb, _, err := c.lookup(newname)
	if err != nil {
		return err
	}
	if err := os.Link(oldname, newname); err != nil {
		return err
	}
	if oino < 0 || np < 0 {
		return fmt.Errorf("crashfs: linked %s, which was not made through the FS", oldname)
	}
	c.dirOp(np, op{kind: opLink, name: nb, ino: oino})
	return nil
}

// Remove removes name on the real file system and models the unlink.
func (c *FS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parent, base, ino, err := c.lookup(name)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	if ino >= 0 && parent >= 0 {
		c.dirOp(parent, op{kind: opUnlink, name: base})
	}
	return nil
}

// Mkdir makes a directory on the real file system and models the new
// entry.
func (c *FS) Mkdir(name string, perm os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parent, base, _, err := c.lookup(name)
	if err != nil {
		return err
	}
	if err := os.Mkdir(name, perm); err != nil {
		return err
	}
	if parent < 0 {
		return fmt.Errorf("crashfs: mkdir of the root")
	}
	c.dirOp(parent, op{kind: opLink, name: base, ino: c.newInode(true, perm)})
	return nil
}

// Chmod changes the mode on the real file system; the model takes it as
// durable at once (modes are not what these tests are about).
func (c *FS) Chmod(name string, mode os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, ino, err := c.lookup(name)
	if err != nil {
		return err
	}
	if err := os.Chmod(name, mode); err != nil {
		return err
	}
	if ino >= 0 {
		c.inodes[ino].mode = mode.Perm()
	}
	return nil
}

// Lstat is os.Lstat.
func (c *FS) Lstat(name string) (os.FileInfo, error) { return os.Lstat(name) }

// Stat is os.Stat.
func (c *FS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// ReadDir is os.ReadDir.
func (c *FS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// SyncDir fsyncs nothing (the real directory's durability is not what
// is tested) and makes the modelled directory's pending operations
// durable, unless its site is disabled.
func (c *FS) SyncDir(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	site := Caller()
	c.beforeSync(site)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, ino, err := c.lookup(dir)
	if err != nil || ino < 0 {
		return fmt.Errorf("crashfs: sync of %s, which is not modelled: %v", dir, err)
	}
	if site == c.disabled {
		return nil
	}
	d := c.inodes[ino]
	for _, o := range d.dpending {
		applyDirOp(d.entries, o)
	}
	d.dpending = nil
	return nil
}

// beforeSync records site and calls the hook, which sees the state just
// before the sync takes effect.
func (c *FS) beforeSync(site string) {
	c.mu.Lock()
	if !c.seen[site] {
		c.seen[site] = true
		c.sites = append(c.sites, site)
	}
	hook := c.hook
	if c.inHook {
		hook = nil
	}
	c.inHook = hook != nil
	c.mu.Unlock()
	if hook != nil {
		hook(site)
		c.mu.Lock()
		c.inHook = false
		c.mu.Unlock()
	}
}

// OnSync sets a hook called at every Sync and SyncDir, with its site,
// just before the sync takes effect: the place to Cut at every sync point.
// Syncs made by the hook itself do not call it again.
func (c *FS) OnSync(hook func(site string)) {
	c.mu.Lock()
	c.hook = hook
	c.mu.Unlock()
}

// Sites returns the sync sites reached so far, in the order first reached.
func (c *FS) Sites() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sites)
}

// Disable turns every sync from site into a no-op in the model ("" undoes
// it).
func (c *FS) Disable(site string) {
	c.mu.Lock()
	c.disabled = site
	c.mu.Unlock()
}

// Caller names the sync site of its caller's caller's ... chain: the
// innermost frame of a cairn package outside internal/vfs (the line that
// asked for the sync), and, when that is in one of the file helpers
// (internal/atomicfile, internal/recordlog), the innermost frame outside
// them too (the store code that used the helper). Test code is never part
// of a site.
func Caller() string {
	var pcs [32]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var parts []string
	for {
		fr, more := frames.Next()
		pkg, fn, ok := cairnFunc(fr.Function)
		if ok && !strings.HasSuffix(fr.File, "_test.go") && pkg != "internal/vfs" && pkg != "internal/vfs/crashfs" {
			parts = append(parts, fmt.Sprintf("%s %s:%d", fn, filepath.Base(fr.File), fr.Line))
			if pkg != "internal/atomicfile" && pkg != "internal/recordlog" {
				break
			}
		}
		if !more {
			break
		}
	}
	if len(parts) > 2 {
		parts = []string{parts[0], parts[len(parts)-1]}
	}
	if len(parts) == 0 {
		return testCode
	}
	return strings.Join(parts, " < ")
}

const module = "github.com/cairn-dev/cairn/"

// cairnFunc splits a function name of the module into its package path
// (relative to the module) and its short name.
func cairnFunc(full string) (pkg, fn string, ok bool) {
	rest, ok := strings.CutPrefix(full, module)
	if !ok {
		return "", "", false
	}
	slash := strings.LastIndex(rest, "/")
	dot := strings.Index(rest[slash+1:], ".")
	if dot < 0 {
		return "", "", false
	}
	pkg = rest[:slash+1+dot]
	return pkg, rest[slash+1:], true
}

// file is an open file of the FS.
type file struct {
	c   *FS
	f   *os.File
	ino int
}

func (f *file) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f *file) Stat() (os.FileInfo, error)              { return f.f.Stat() }
func (f *file) Close() error                            { return f.f.Close() }
func (f *file) Name() string                            { return f.f.Name() }

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	n, err := f.f.WriteAt(p, off)
	if n > 0 {
		in := f.c.inodes[f.ino]
		in.pending = append(in.pending, op{kind: opWrite, off: off, data: slices.Clone(p[:n])})
	}
	return n, err
}

func (f *file) Truncate(size int64) error {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	n := f.c.inodes[f.ino]
	n.pending = append(n.pending, op{kind: opTruncate, off: size})
	return nil
}

// Sync makes the modelled file's pending writes durable, unless its site
// is disabled. The real file is not synced.
func (f *file) Sync() error { return f.sync(Caller()) }

// Presync is Sync, at a site named PresyncSite+Caller(): Mutate leaves
// those in place, since no guarantee may rely on them.
func (f *file) Presync() error { return f.sync(PresyncSite + Caller()) }

// PresyncSite starts the name of every site of a Presync.
const PresyncSite = "presync "

func (f *file) sync(site string) error {
	if _, err := f.f.Stat(); err != nil {
		return err
	}
	f.c.beforeSync(site)
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if site == f.c.disabled {
		return nil
	}
	n := f.c.inodes[f.ino]
	for _, o := range n.pending {
		n.synced = applyFileOp(n.synced, o, len(o.data))
	}
	n.pending = nil
	return nil
}

func (f *file) Dup(name string) (vfs.File, error) {
	g, err := vfs.Dup(f.f, name)
	if err != nil {
		return nil, err
	}
	return &file{c: f.c, f: g, ino: f.ino}, nil
}

// applyFileOp applies o to content, of a write only its first keep bytes.
func applyFileOp(content []byte, o op, keep int) []byte {
	switch o.kind {
	case opTruncate:
		if o.off <= int64(len(content)) {
			return content[:o.off]
		}
		return append(content, make([]byte, o.off-int64(len(content)))...)
	case opWrite:
		end := o.off + int64(keep)
		if end > int64(len(content)) {
			content = append(content, make([]byte, end-int64(len(content)))...)
		}
		copy(content[o.off:end], o.data[:keep])
	}
	return content
}

// Cut materialises the durable image (see Mode) as a new directory dst,
// which must not exist; rng drives mode Random.
func (c *FS) Cut(dst string, mode Mode, rng *rand.Rand) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	contents := map[int][]byte{}
	return c.materialise(0, dst, mode, rng, contents)
}

func (c *FS) materialise(ino int, path string, mode Mode, rng *rand.Rand, contents map[int][]byte) error {
	n := c.inodes[ino]
	if !n.dir {
		data, ok := contents[ino]
		if !ok {
			data = c.fileImage(n, mode, rng)
			contents[ino] = data
		}
		return os.WriteFile(path, data, n.mode|0o200)
	}
	if err := os.Mkdir(path, n.mode|0o700); err != nil {
		return err
	}
	entries := maps.Clone(n.entries)
	if mode == Random && len(n.dpending) > 0 {
		for _, o := range n.dpending[:rng.IntN(len(n.dpending)+1)] {
			applyDirOp(entries, o)
		}
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := c.materialise(entries[name], filepath.Join(path, name), mode, rng, contents); err != nil {
			return err
		}
	}
	return nil
}

// fileImage is n's synced content with, in mode Random, each pending
// operation kept, dropped or (a write) torn at a sector boundary.
func (c *FS) fileImage(n *inode, mode Mode, rng *rand.Rand) []byte {
	data := slices.Clone(n.synced)
	if mode != Random {
		return data
	}
	for _, o := range n.pending {
		switch rng.IntN(3) {
		case 0: // dropped
		case 1: // kept whole
			data = applyFileOp(data, o, len(o.data))
		case 2: // torn
			if o.kind != opWrite {
				continue
			}
			// Keep up to a sector boundary inside the write; the rest of
			// it is missing or, where the size reached it, zeros.
			var cuts []int
			for b := (o.off/Sector + 1) * Sector; b < o.off+int64(len(o.data)); b += Sector {
				cuts = append(cuts, int(b-o.off))
			}
			keep := 0
			if len(cuts) > 0 {
				keep = cuts[rng.IntN(len(cuts))]
			}
			data = applyFileOp(data, o, keep)
			if rng.IntN(2) == 0 {
				zeros := op{kind: opWrite, off: o.off + int64(keep), data: make([]byte, len(o.data)-keep)}
				data = applyFileOp(data, zeros, len(zeros.data))
			}
		}
	}
	return data
}

// testCode is the site of a sync made by the test itself, not by cairn.
const testCode = "(test code)"
