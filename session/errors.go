package session

import (
	"errors"
	"fmt"
)

// Code is a stable, wire-visible error code. Codes never change meaning.
type Code string

// The error codes every store, the engine, the wire protocol and the bindings
// share.
const (
	CodeNotFound            Code = "not_found"
	CodeConflict            Code = "conflict"
	CodeSchemaUnsupported   Code = "schema_unsupported"
	CodeInvalidArgument     Code = "invalid_argument"
	CodeTooLarge            Code = "too_large"
	CodeNoCheckpoint        Code = "no_checkpoint"
	CodeNotOwner            Code = "not_owner"
	CodeStepIdentityChanged Code = "step_identity_changed"
	CodeLocked              Code = "locked"
	CodeInternal            Code = "internal"
	CodeCorrupt             Code = "corrupt"
	CodeNoSpace             Code = "no_space"
)

// Sentinel errors. Callers test for them with errors.Is; the detailed errors
// this package and the stores return wrap exactly one of them.
var (
	// ErrNotFound is returned when a session, run, workflow or generation
	// does not exist.
	ErrNotFound = errors.New("not_found")
	// ErrConflict is returned when a commit's expected generation is not the
	// session's current one, or an id that must be new already exists.
	ErrConflict = errors.New("conflict")
	// ErrSchemaUnsupported is returned for a document whose schema_version
	// is newer than this build understands. Nothing is written.
	ErrSchemaUnsupported = errors.New("schema_unsupported")
	// ErrInvalidArgument is returned for input that fails validation.
	ErrInvalidArgument = errors.New("invalid_argument")
	// ErrTooLarge is returned when a commit exceeds the store's size limit.
	ErrTooLarge = errors.New("too_large")
	// ErrNoCheckpoint is returned by run resumption when the run has no loop
	// checkpoint: it is unknown, completed, or never checkpointed.
	ErrNoCheckpoint = errors.New("no_checkpoint")
	// ErrNotOwner is returned when a run is addressed through a session that
	// does not own it.
	ErrNotOwner = errors.New("not_owner")
	// ErrStepIdentityChanged is returned when a workflow step recorded as
	// done has a different identity from the spec given now.
	ErrStepIdentityChanged = errors.New("step_identity_changed")
	// ErrLocked is returned when another process holds the store's writer
	// lock. The concrete error is a *LockedError naming the holder.
	ErrLocked = errors.New("locked")
	// ErrInternal is returned for I/O failures and broken invariants.
	ErrInternal = errors.New("internal")
	// ErrCorrupt is returned when a log or file is damaged: bytes that fail
	// their checksum with intact data after them, which is not the torn
	// tail of an interrupted write. Nothing is trimmed or deleted.
	ErrCorrupt = errors.New("corrupt")
	// ErrNoSpace is returned when the file system cannot take a write: it
	// is full (ENOSPC), the user's quota is spent (EDQUOT), or the file
	// would pass the largest size allowed (EFBIG, as RLIMIT_FSIZE gives).
	// Nothing was acknowledged; retrying after space is freed succeeds.
	ErrNoSpace = errors.New("no_space")
)

var codeSentinels = []struct {
	code Code
	err  error
}{
	{CodeNotFound, ErrNotFound},
	{CodeConflict, ErrConflict},
	{CodeSchemaUnsupported, ErrSchemaUnsupported},
	{CodeInvalidArgument, ErrInvalidArgument},
	{CodeTooLarge, ErrTooLarge},
	{CodeNoCheckpoint, ErrNoCheckpoint},
	{CodeNotOwner, ErrNotOwner},
	{CodeStepIdentityChanged, ErrStepIdentityChanged},
	{CodeLocked, ErrLocked},
	{CodeInternal, ErrInternal},
	{CodeCorrupt, ErrCorrupt},
	{CodeNoSpace, ErrNoSpace},
}

// Codes lists every error code, in a stable order.
func Codes() []Code {
	out := make([]Code, len(codeSentinels))
	for i, c := range codeSentinels {
		out[i] = c.code
	}
	return out
}

// CodeOf reports the stable code of err: the code of the outermost *Error
// it wraps, else the code of the sentinel it wraps, else CodeInternal for
// any other non-nil error, or "" for nil. The outermost *Error decides
// because its cause may carry a code of its own (an internal failure whose
// cause was a not_found, say).
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var se *Error
	if errors.As(err, &se) {
		return se.Code
	}
	for _, c := range codeSentinels {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

// SentinelOf returns the sentinel error for code, or ErrInternal for an
// unknown code.
func SentinelOf(code Code) error {
	for _, c := range codeSentinels {
		if c.code == code {
			return c.err
		}
	}
	return ErrInternal
}

// Error is a coded error with a human-readable message and, optionally, the
// error that caused it. It unwraps to both the sentinel of its code and the
// cause, so errors.Is(err, ErrInternal) and errors.Is(err, syscall.ENOSPC)
// (or errors.As(err, &pathErr)) hold for the same error.
type Error struct {
	Code Code
	// Message is the whole human-readable text (for a wrapped error it ends
	// with the cause's text); it is what the wire carries.
	Message string
	// Err is the cause, or nil.
	Err error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the sentinel error of the code and, when there is one, the
// cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{SentinelOf(e.Code)}
	}
	return []error{SentinelOf(e.Code), e.Err}
}

// Errorf returns an *Error with the given code and formatted message. It
// keeps no cause: to record an underlying error, use Wrap.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code whose cause is cause and whose
// message is the formatted text, ": ", and cause's text (as %v would have
// flattened it). A nil cause gives Errorf's result.
func Wrap(code Code, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause == nil {
		return &Error{Code: code, Message: msg}
	}
	return &Error{Code: code, Message: msg + ": " + cause.Error(), Err: cause}
}

// LockedError reports that another process holds a store's writer lock.
type LockedError struct {
	Path string // the lock file
	PID  int    // the holder's pid, or 0 when it could not be read
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("locked: store %s is held by another process (pid %d)", e.Path, e.PID)
	}
	return fmt.Sprintf("locked: store %s is held by another process (pid unknown)", e.Path)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// HolderPID returns the pid of the process holding the lock, 0 if unknown.
func (e *LockedError) HolderPID() int { return e.PID }
