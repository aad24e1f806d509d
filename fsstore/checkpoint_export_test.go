package fsstore

// IndexForTest returns the index of session id as a checkpoint would
// encode it (deterministic), and the log length its checkpoint covered when
// the store opened it (0: it was walked from the start).
func IndexForTest(s *Store, id string) (index []byte, idxAt int64) {
	sf, err := s.lockSession(id)
	if err != nil {
		return nil, -1
	}
	defer sf.mu.Unlock()
	b, err := idxEncMode.Marshal(toIdx(sf.t))
	if err != nil {
		panic(err)
	}
	return b, sf.idxAt
}
