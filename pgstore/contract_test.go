package pgstore_test

import (
	"context"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/session/storetest"
)

// TestContract runs the store contract suite against a real server, each
// store on a database of its own; Reopen is a new connection pool on the
// same database.
func TestContract(t *testing.T) {
	srv := pgtest.Start(t)
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) session.Store {
			s, err := pgstore.Open(context.Background(), newDB(t, srv), pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Reopen: func(t *testing.T, s session.Store) session.Store {
			url := s.(*pgstore.Store).DSN()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := pgstore.Open(context.Background(), url, pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s2
		},
	})
}
