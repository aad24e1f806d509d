package api

import "github.com/cairn-dev/cairn/session"

// ProtocolVersion is the version of the wire protocol this build speaks
// (hello's protocol_version).
const ProtocolVersion = 1

// SchemaVersion is the newest schema_version of the stored objects this
// build reads and writes.
const SchemaVersion = session.SchemaVersion

// EnvelopeSchemaVersion is the version of the export envelope this build
// writes and the newest it reads.
const EnvelopeSchemaVersion = 1
