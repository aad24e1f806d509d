// Package recordlog is cairn's one append-only record log: the framing,
// the scan that finds where intact data ends, and the durable append that
// the file store's session and workflow logs and the workspace's manifest
// logs are built on.
//
// # Format
//
// A log file starts with a magic string of its owner's choosing (the owner
// checks it; see HasMagic) and holds records framed as
//
//	[u32 payload length][u32 CRC-32C of kind+payload][u8 kind][payload]
//
// integers little-endian, the payload at most MaxPayload bytes. The kind
// and the payload's encoding belong to the owner.
//
// # Guarantees
//
//   - A record is accepted by Scan only if its whole frame is present and
//     its checksum matches, so a torn write (a crash part-way through an
//     append) or a flipped bit ends the intact prefix; Scan never reads a
//     length it has not bounds-checked or allocates on a corrupt length.
//   - Scan also stops where the owner's callback refuses a record, so an
//     owner that groups records into commits (the file store) or numbers
//     them (manifests) ends the valid data at the last complete unit.
//   - Recovery trims: File.Truncate cuts a log back to the end the owner
//     settled on (the last intact, accepted record), so nothing after it
//     (a torn frame, an uncommitted run of records) is ever read again or
//     mistaken for data by a later append. The trim is not synced on its
//     own: the next append's fdatasync makes the new size durable along
//     with the data, and a crash before it leaves the old tail, which the
//     next recovery trims again.
//   - File.Append is durable when it returns nil: one write at the
//     committed end and one fdatasync. On failure it truncates the file
//     back to the committed end (unsynced, as a trim: a crash before the
//     next append may bring the failed, unacknowledged append back whole,
//     or torn, which recovery trims); if the truncate fails it reports the
//     file broken, and the owner must not append to it again until it has
//     reopened and rescanned it.
//   - A log may run on past its committed end in zeros its File wrote
//     ahead (File.Preallocate: written and fdatasync'd once, so the
//     appends that overwrite them change neither size nor block map).
//     Appends go at the committed end, not the file's. No frame is all
//     zeros (ZeroFrame), so a scan stops where zeros begin; Zeros tells an
//     owner that the rest of the file is zeros, a clean end rather than a
//     torn one. Rollback, Truncate and Close cut the zeros off.
//   - A new log file appears whole or not at all (Create, through
//     internal/atomicfile): its first bytes are written and synced under
//     a temp name and renamed into place.
package recordlog
