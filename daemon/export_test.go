package daemon

// SerialRuns reports how many requests ran without passing reading on,
// and how many of those passed it on after protocol.SerialLimit.
func SerialRuns(s *Server) (runs, released uint64) {
	return s.serialRuns.Load(), s.releases.Load()
}
