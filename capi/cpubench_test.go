//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/workspace"
)

// noSyncFS is the real file system with fdatasync made a no-op, so that a
// benchmark's time is the CPU of the calls, not the disk's.
type noSyncFS struct{ vfs.FS }

func (f noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	fl, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{fl}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error    { return nil }
func (noSyncFile) Presync() error { return nil }

func (f noSyncFile) Dup(name string) (vfs.File, error) {
	d, err := f.File.Dup(name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{d}, nil
}

// BenchmarkCallCPU is BenchmarkEmbeddedCheckpoint and BenchmarkEmbeddedPut
// without the fdatasync (noSyncFS; so never durable: for measuring only):
// the Go CPU of a call besides the disk, from its JSON params to its
// JSON result, as cairn_call runs it in embedded mode (openInstance's
// stack: a file store, a tracked workspace). Each call's request is the
// one buffer, as a host encodes each into memory it just wrote: the
// checkpoint's turn is rewritten in place (padded with spaces), a put is
// made there (its making, a few microseconds, is timed too).
func BenchmarkCallCPU(b *testing.B) {
	for _, bc := range []struct {
		name, method string
		req          func(run string) (req []byte, next func(i int))
	}{
		{"checkpoint", "checkpoint", func(run string) ([]byte, func(int)) {
			req := turnRequest(run, 1)
			const field = `"turn": 1,`
			at := bytes.Index(req, []byte(field))
			req = slices.Concat(req[:at], []byte(`"turn":                    1,`), req[at+len(field):])
			num := req[at+len(`"turn":`) : at+len(`"turn":                    1`)]
			return req, func(i int) {
				d := strconv.AppendInt(nil, int64(i), 10)
				for j := range num {
					num[j] = ' '
				}
				copy(num[len(num)-len(d):], d)
			}
		}},
		{"put", "save", func(string) ([]byte, func(int)) {
			// Each put its own checkpoint's records (one the same: the
			// head), as a saver's; made in the buffer before the call.
			req := putRequest(1)
			return req, func(i int) { req = append(req[:0], putRequest(i)...) }
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ws := b.TempDir()
			st, err := fsstore.Open(ws, fsstore.Options{FS: noSyncFS{vfs.OS}, PreallocBytes: fsstore.DefaultPreallocBytes})
			if err != nil {
				b.Fatal(err)
			}
			tr, err := workspace.Open(ws, workspace.Options{})
			if err != nil {
				b.Fatal(err)
			}
			in := &instance{pid: os.Getpid(), workspace: ws, files: tr, eng: engine.New(st, engine.Options{Root: ws, Workspace: tr})}
			b.Cleanup(func() {
				_ = in.eng.Close()
				_ = tr.Close()
				_ = st.Close()
			})
			ctx := context.Background()
			do := func(method string, req []byte) []byte {
				res, err := in.invoke(ctx, method, req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := encodeResult(res)
				if err != nil {
					b.Fatal(err)
				}
				return out
			}
			do("save", []byte(`{"session_id":"agent","change":{"append_messages":[{"role":"system","content":"you are an agent"}]}}`))
			var br struct {
				RunID string `json:"run_id"`
			}
			if err := json.Unmarshal(do("beginRun", []byte(`{"session_id":"agent"}`)), &br); err != nil {
				b.Fatal(err)
			}
			req, next := bc.req(br.RunID)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				next(i)
				do(bc.method, req)
			}
		})
	}
}
