package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
)

// TestArtifactsByIDPostgres runs the artifactsByID tests against pgstore,
// whose native ArtifactsByID the engine uses: each store the tests open is
// a new database on one server.
func TestArtifactsByIDPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	var n atomic.Int64
	pg := storeFactory{"pg", func(string) (session.Store, error) {
		url := srv.CreateDB(fmt.Sprintf("byid%d", n.Add(1)))
		return pgstore.Open(context.Background(), url, pgstore.Options{CollectEvery: -1})
	}}
	// No engine test runs in parallel, so the table can be swapped for
	// the length of this one.
	saved := stores
	stores = []storeFactory{pg}
	t.Cleanup(func() { stores = saved })
	t.Run("TestArtifactsByID", TestArtifactsByID)
	t.Run("TestArtifactsByIDReplyLimit", TestArtifactsByIDReplyLimit)
}
