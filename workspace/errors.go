package workspace

import "errors"

// Sentinel errors. Callers test for them with errors.Is; the returned errors
// wrap them with the operation and the path involved. A manifest write the
// file system refuses is a *session.Error from session.FileError instead:
// session.ErrNoSpace for a full disk, with a message naming the manifest
// file, never a temp file.
var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("workspace: tracker closed")

	// ErrNotDirectory is returned by Open when the root is missing or is not
	// a directory.
	ErrNotDirectory = errors.New("workspace: root is not a directory")

	// ErrLocked is returned by Open when another tracker (in this process or
	// another) holds the manifest store of the same workspace.
	ErrLocked = errors.New("workspace: manifest store locked by another tracker")

	// ErrUnsafePath is returned when something cairn must write through
	// (.cairn, .cairn/manifests) is a symlink or not a directory.
	ErrUnsafePath = errors.New("workspace: refusing to write through a symlink or non-directory")

	// ErrNoManifest is returned by Diff when the reference is empty (the
	// generation was committed without a workspace manifest).
	ErrNoManifest = errors.New("workspace: empty manifest reference")

	// ErrManifestNotFound is returned when a reference names a manifest this
	// workspace's store does not hold: another store's id (a foreign or
	// re-created .cairn), or a sequence number past the newest manifest.
	ErrManifestNotFound = errors.New("workspace: manifest not found")

	// ErrCorrupt is returned when a manifest file fails its checksum or does
	// not parse. A torn tail of the delta log is not corruption: Open trims it.
	ErrCorrupt = errors.New("workspace: manifest store corrupt")

	// ErrBadClock is returned by Changes for a clock string that does not
	// parse at all; the error also matches session.ErrInvalidArgument. A well-formed clock from another instance is not an
	// error: it yields a fresh-instance answer.
	ErrBadClock = errors.New("workspace: malformed clock")
)
