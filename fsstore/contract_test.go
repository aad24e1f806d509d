package fsstore_test

import (
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/session/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) session.Store {
			s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Reopen: func(t *testing.T, s session.Store) session.Store {
			root := s.(*fsstore.Store).Root()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := fsstore.Open(root, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s2
		},
	})
}
