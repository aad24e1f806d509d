package workspace

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// item is one path being put into a manifest or compared with one.
type item struct {
	rel    string
	st     stat
	target string
	hash   [32]byte
	flags  uint8 // flagRacy when hashed too close to the file's last change
	have   bool  // hash is known
	gone   bool  // the path no longer exists
}

func (it *item) rec() mrec {
	return mrec{size: it.st.size, mtime: it.st.mtime, ctime: it.st.ctime, mode: it.st.mode, flags: it.flags, hash: it.hash}
}

// itemLocked snapshots the index entry for rel (nil entry: gone), taking
// the cached hash when it can be trusted.
func (t *Tracker) itemLocked(rel string, e *entry) item {
	if e == nil {
		return item{rel: rel, gone: true}
	}
	it := item{rel: rel, st: e.stat(), target: t.links[rel]}
	if e.flags&flagHashed != 0 && e.flags&flagRacy == 0 {
		it.hash, it.have = e.hash, true
	}
	return it
}

// hashItems computes the missing hashes of items in parallel.
func (t *Tracker) hashItems(ctx context.Context, items []item) error {
	var todo []int
	for i := range items {
		if !items[i].have && !items[i].gone {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	workers := t.opts.HashWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(todo))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for i := range next {
				t.hashOne(&items[i], buf)
			}
		}()
	}
	var err error
feed:
	for _, i := range todo {
		select {
		case next <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	// Cache what was learnt, where the index still describes the same file.
	t.mu.Lock()
	for _, i := range todo {
		it := &items[i]
		if it.gone || !it.have {
			continue
		}
		if e := t.lookupLocked(it.rel); e != nil && e.stat() == it.st {
			e.hash, e.flags = it.hash, flagHashed|it.flags
		}
	}
	t.mu.Unlock()
	return nil
}

// hashOne hashes one path: a regular file's content, a symlink's target
// string, nothing for other kinds. It opens the file inside the workspace
// root without following a symlink out of it, never opens anything but a
// regular file (a FIFO would block), and takes the stat from the open file
// before and after reading, so the (stat, hash) pair it records is
// consistent even when the file changes meanwhile.
func (t *Tracker) hashOne(it *item, buf []byte) {
	now := time.Now().UnixNano()
	defer func() {
		if !it.gone && racyAt(it.st, now) {
			it.flags |= flagRacy
		}
	}()
	switch {
	case it.st.mode&fs.ModeSymlink != 0:
		h := sha256.New()
		io.WriteString(h, "symlink\x00"+it.target)
		h.Sum(it.hash[:0])
		it.have = true
		return
	case !it.st.mode.IsRegular():
		it.hash, it.have = [32]byte{}, true
		return
	}
	for attempt := 0; ; attempt++ {
		f, err := t.rootFS.OpenFile(it.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				it.gone = true
			}
			// Unreadable: leave the hash unknown; the comparison treats it
			// as changed.
			return
		}
		before, err := f.Stat()
		if err != nil || !before.Mode().IsRegular() {
			f.Close()
			return
		}
		h := sha256.New()
		_, err = io.CopyBuffer(h, onlyReader{f}, buf)
		after, serr := f.Stat()
		f.Close()
		if err != nil || serr != nil {
			return
		}
		it.st = statOf(before)
		h.Sum(it.hash[:0])
		it.have = true
		if statOf(after) == it.st || attempt >= 2 {
			return
		}
		// Written to while being read: read it again.
	}
}

// onlyReader hides (*os.File).WriteTo so io.CopyBuffer uses the buffer.
type onlyReader struct{ io.Reader }
