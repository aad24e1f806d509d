package fsstore

// FileNameForTest is the name of the log of a session or workflow id.
var FileNameForTest = fileName
