package daemon

// InlineStats returns how many requests s ran on their connection's reader
// and how many times its watchdog handed a reading to a relay.
func InlineStats(s *Server) (runs, handOffs uint64) {
	return s.inlineRuns.Load(), s.inlineHandOffs.Load()
}
