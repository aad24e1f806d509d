package api

// ExportFileRequest exports a session to a file at Path (absolute). The
// file is written beside Path page by page as the session is read, synced
// and renamed into place when complete, so the exporter's memory stays
// bounded by a page whatever the session's size.
type ExportFileRequest struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
}

// ExportFileResult reports the file exportFile wrote: its path, its size in
// bytes and the generation of the session it holds.
type ExportFileResult struct {
	Path       string `json:"path"`
	Bytes      int64  `json:"bytes"`
	Generation uint64 `json:"generation"`
}

// ImportFileRequest imports the envelope (or bare session) in the file at
// Path (absolute), as import takes it.
type ImportFileRequest struct {
	Path string `json:"path"`
}
