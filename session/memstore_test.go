package session_test

import (
	"testing"

	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/session/storetest"
)

func TestMemStoreContract(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		New: func(t *testing.T) session.Store { return session.NewMemStore() },
	})
}
