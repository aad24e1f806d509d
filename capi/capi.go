// Command capi is libcairn, cairn's C-ABI shared library, built with
//
//	go build -buildmode=c-shared -o build/libcairn.so ./capi
//
// cairn.h is its public header. The C entry points live in shim.c: they
// refuse use in a forked child before anything enters the Go runtime, and
// implement cairn_submit's hand-off to a Go-owned thread. This file holds
// the handle table and the Go side of every entry point; methods.go maps
// method names to the engine (embedded mode) or the daemon (client mode).
// Without cgo (a cross-compile, CGO_ENABLED=0) the package is empty: this
// file imports "C", and the others are built only with the cgo tag.
package main

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "cairn.h"
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/internal/version"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

func main() {}

// handles maps open handle numbers to their instances.
var handles struct {
	sync.RWMutex
	next uint64
	m    map[uint64]*instance
}

// libraryPathOnce passes the library's path to protocol at the first open.
var libraryPathOnce sync.Once

// openCount counts open handles (cairn_open_handles).
var openCount atomic.Int64

func init() {
	handles.m = map[uint64]*instance{}
	go serveSubmitted()
}

// serveSubmitted drains the queue of cairn_submit calls. The thread that
// blocks in cairn_shim_next belongs to the Go runtime, so neither it nor the
// goroutines running the calls ever enter Go from a foreign stack.
func serveSubmitted() {
	for {
		r := C.cairn_shim_next()
		go func() {
			method := C.GoString(r.method)
			req := C.GoBytes(unsafe.Pointer(r.request), C.int(r.request_len))
			p, n, err := callC(uint64(r.handle), method, req)
			r.rc = C.int(setResultC(p, n, err, &r.response, &r.response_len, &r.err))
			C.cairn_shim_finish(r)
		}()
	}
}

//export cairn_go_version
func cairn_go_version() *C.char { return C.CString(version.Version) }

//export cairn_go_open_handles
func cairn_go_open_handles() C.int { return C.int(openCount.Load()) }

//export cairn_go_open
func cairn_go_open(options *C.char, handle *C.uint64_t, errOut **C.char) C.int {
	h, err := openHandle(C.GoString(options))
	if err != nil {
		return C.int(setError(err, errOut))
	}
	*handle = C.uint64_t(h)
	return C.CAIRN_OK
}

// openHandle opens an instance and registers it under a new handle.
func openHandle(options string) (uint64, error) {
	libraryPathOnce.Do(func() {
		// Packages ship cairnd beside libcairn; the host executable
		// (python, node) says nothing about where that is. Read here, not
		// in init: see cairn_shim_library_path.
		protocol.SetLibraryPath(C.GoString(C.cairn_shim_library_path()))
	})
	in, err := openInstance(options)
	if err != nil {
		return 0, err
	}
	handles.Lock()
	handles.next++
	h := handles.next
	handles.m[h] = in
	handles.Unlock()
	openCount.Add(1)
	return h, nil
}

// closeHandle closes and forgets handle h.
func closeHandle(h uint64) error {
	handles.Lock()
	in := handles.m[h]
	delete(handles.m, h)
	handles.Unlock()
	if in == nil {
		return errBadHandle
	}
	openCount.Add(-1)
	return in.close()
}

//export cairn_go_call
func cairn_go_call(handle C.uint64_t, method *C.char, request *C.uint8_t, requestLen C.size_t, response **C.uint8_t, responseLen *C.size_t, errOut **C.char) C.int {
	// The request is only read during the call: no copy needed.
	req := unsafe.Slice((*byte)(unsafe.Pointer(request)), int(requestLen))
	p, n, err := callC(uint64(handle), C.GoString(method), req)
	return C.int(setResultC(p, n, err, response, responseLen, errOut))
}

//export cairn_go_call_buf
func cairn_go_call_buf(handle C.uint64_t, method *C.char, request *C.uint8_t, requestLen C.size_t, buf *C.uint8_t, bufCap C.size_t, response **C.uint8_t, responseLen *C.size_t, errOut **C.char) C.int {
	req := unsafe.Slice((*byte)(unsafe.Pointer(request)), int(requestLen))
	var into []byte
	if buf != nil && bufCap > 0 {
		into = unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(bufCap))
	}
	p, n, err := callInto(uint64(handle), C.GoString(method), req, into)
	return C.int(setResultC(p, n, err, response, responseLen, errOut))
}

//export cairn_go_close
func cairn_go_close(handle C.uint64_t, errOut **C.char) C.int {
	if err := closeHandle(uint64(handle)); err != nil {
		return C.int(setError(err, errOut))
	}
	return C.CAIRN_OK
}

// errBadHandle answers a call on an unknown or closed handle. (Use in a
// forked child never gets this far: shim.c refuses it before entering Go.)
var errBadHandle = &codedError{code: "bad_handle", msg: "unknown or closed handle"}

// codedError is an error with a code that only the C API has.
type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.code + ": " + e.msg }

func lookup(h uint64) (*instance, error) {
	handles.RLock()
	in := handles.m[h]
	handles.RUnlock()
	if in == nil {
		return nil, errBadHandle
	}
	return in, nil
}

// call runs method on handle h with JSON params req and returns the JSON
// result: callC's, copied to Go.
func call(h uint64, method string, req []byte) ([]byte, error) {
	p, n, err := callC(h, method, req)
	if err != nil {
		return nil, err
	}
	return takeC(p, n), nil
}

// takeC returns the n bytes of C memory at p, copied to Go, and frees p.
func takeC(p unsafe.Pointer, n int) []byte {
	defer C.free(p)
	return C.GoBytes(p, C.int(n))
}

// encodeResult returns the JSON of a method's result. The hot reads
// (api.JSONAppender) encode themselves, copying stored values as they are
// instead of having encoding/json re-validate and compact them, and so
// does a checkpoint's answer, without encoding/json's reflection.
func encodeResult(res any) ([]byte, error) {
	if a, ok := res.(api.JSONAppender); ok {
		if b := a.AppendJSON(nil); b != nil {
			return b, nil
		}
	}
	return json.Marshal(res)
}

// callC is call with the result in C memory (malloc), as the C API
// answers it.
func callC(h uint64, method string, req []byte) (unsafe.Pointer, int, error) {
	return callInto(h, method, req, nil)
}

// callInto is callC that writes a result of at most len(buf) bytes into
// buf (caller memory) and returns a nil pointer for it, so that the caller
// has nothing to free.
func callInto(h uint64, method string, req, buf []byte) (unsafe.Pointer, int, error) {
	in, err := lookup(h)
	if err != nil {
		return nil, 0, err
	}
	ctx := context.Background()
	switch {
	case method != api.Messages.Name:
	case in.eng != nil && in.padMu.TryLock():
		// The page is encoded into C memory below, and then nothing holds
		// the bytes the store read it from: they can be read into again.
		defer in.padMu.Unlock()
		defer in.pad.Reset()
		ctx = scratch.With(ctx, &in.pad)
	case in.client != nil:
		// The same in daemon mode: the page's messages are slices of the
		// answer as the client read it, not copies, until it is encoded.
		var loan protocol.Loan
		defer loan.Release()
		ctx = protocol.WithLoan(ctx, &loan)
	}
	res, err := in.invoke(ctx, method, req)
	if err != nil {
		return nil, 0, err
	}
	return encodeResultTo(res, buf)
}

// encodeResultTo encodes res once: into buf (caller memory; the pointer
// returned is then nil) when it fits, as cairn_call_buf promises, else
// into C memory (malloc). A hot read (api.JSONAppender) encodes itself
// straight into the memory it is answered in, so a page of messages is
// copied once, from the store's buffers, not a second time out of Go's
// heap; its JSONSize is a bound, so an answer under it that fits buf is
// copied there. What an appender cannot encode (it answers nil) goes
// through encoding/json, which reports why.
func encodeResultTo(res any, buf []byte) (unsafe.Pointer, int, error) {
	var b []byte
	if a, ok := res.(api.JSONAppender); ok {
		if pr, ok := a.(api.JSONPreparer); ok {
			a = pr.PrepareJSON() // asked for its size, then its bytes
		}
		size := a.JSONSize()
		dst, p := buf, unsafe.Pointer(nil)
		if size > len(buf) {
			p = C.malloc(C.size_t(max(size, 1)))
			dst = unsafe.Slice((*byte)(p), size)
		}
		b = a.AppendJSON(dst[:0])
		switch {
		case b == nil || unsafe.SliceData(b) != unsafe.SliceData(dst):
			// nil, or outgrown (JSONSize was wrong): append moved it to
			// Go's heap.
			C.free(p)
		case p == nil:
			return nil, len(b), nil
		case len(b) > len(buf):
			return p, len(b), nil
		default:
			n := copy(buf, b)
			C.free(p)
			return nil, n, nil
		}
	}
	if b == nil {
		var err error
		if b, err = json.Marshal(res); err != nil {
			return nil, 0, err
		}
	}
	if buf != nil && len(b) <= len(buf) {
		return nil, copy(buf, b), nil
	}
	return C.CBytes(b), len(b), nil
}

// setResultC stores a call's outcome, its result already in C memory, in
// the C out-parameters and returns the return code.
func setResultC(p unsafe.Pointer, n int, err error, response **C.uint8_t, responseLen *C.size_t, errOut **C.char) int {
	if err != nil {
		return setError(err, errOut)
	}
	*response = (*C.uint8_t)(p)
	*responseLen = C.size_t(n)
	return C.CAIRN_OK
}

// codes maps wire codes to return codes (cairn.h).
var codes = map[string]int{
	string(session.CodeInternal):            C.CAIRN_E_INTERNAL,
	string(session.CodeInvalidArgument):     C.CAIRN_E_INVALID_ARGUMENT,
	string(session.CodeNotFound):            C.CAIRN_E_NOT_FOUND,
	string(session.CodeConflict):            C.CAIRN_E_CONFLICT,
	string(session.CodeSchemaUnsupported):   C.CAIRN_E_SCHEMA_UNSUPPORTED,
	string(session.CodeTooLarge):            C.CAIRN_E_TOO_LARGE,
	string(session.CodeNoCheckpoint):        C.CAIRN_E_NO_CHECKPOINT,
	string(session.CodeNotOwner):            C.CAIRN_E_NOT_OWNER,
	string(session.CodeStepIdentityChanged): C.CAIRN_E_STEP_IDENTITY_CHANGED,
	string(session.CodeLocked):              C.CAIRN_E_LOCKED,
	string(session.CodeCorrupt):             C.CAIRN_E_CORRUPT,
	string(session.CodeNoSpace):             C.CAIRN_E_NO_SPACE,
	string(api.CodeUnavailable):             C.CAIRN_E_UNAVAILABLE,
	"forked":                                C.CAIRN_E_FORKED,
	"bad_handle":                            C.CAIRN_E_BAD_HANDLE,
	string(api.CodeMethodNotFound):          C.CAIRN_E_METHOD_NOT_FOUND,
	string(api.CodeBadRequest):              C.CAIRN_E_BAD_REQUEST,
}

// codeOf names err's stable code.
func codeOf(err error) string {
	var ce *codedError
	var re *protocol.RemoteError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &re):
		return string(re.Code)
	case errors.Is(err, protocol.ErrNoDaemon), errors.Is(err, protocol.ErrConnectionLost), errors.Is(err, protocol.ErrClosed), errors.Is(err, protocol.ErrUnavailable):
		return string(api.CodeUnavailable)
	case errors.Is(err, protocol.ErrMethodNotFound):
		return string(api.CodeMethodNotFound)
	case errors.Is(err, protocol.ErrBadRequest):
		return string(api.CodeBadRequest)
	}
	return string(session.CodeOf(err))
}

// messageOf returns err's message without the code prefix the Go error
// text carries (the code travels in its own field).
func messageOf(err error) string {
	var se *session.Error
	var re *protocol.RemoteError
	var ce *codedError
	switch {
	case errors.As(err, &ce):
		return ce.msg
	case errors.As(err, &re):
		return re.Message
	case errors.As(err, &se):
		return se.Message
	}
	return err.Error()
}

// setError stores err as the JSON {code, message} in *errOut (when it is not
// NULL) and returns the return code.
func setError(err error, errOut **C.char) int {
	code := codeOf(err)
	rc, ok := codes[code]
	if !ok {
		rc = C.CAIRN_E_INTERNAL
	}
	if errOut != nil {
		b, _ := json.Marshal(struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}{code, messageOf(err)})
		*errOut = C.CString(string(b))
	}
	return rc
}
