package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
)

var dbSeq atomic.Int64

// newDB returns the URL of a new, empty database on srv.
func newDB(t *testing.T, srv *pgtest.Server) string {
	t.Helper()
	return srv.CreateDB(fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1)))
}

func openStore(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
