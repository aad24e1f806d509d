package procs_test

import (
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/procs"
)

// ExampleValidateURL shows which health check URLs are dialled: loopback
// only.
func ExampleValidateURL() {
	for _, u := range []string{"http://127.0.0.1:3000/healthz", "http://localhost:8080/", "http://10.0.0.5/healthz"} {
		_, err := procs.ValidateURL(u)
		fmt.Println(u, errors.Is(err, procs.ErrNotLoopback))
	}
	// Output:
	// http://127.0.0.1:3000/healthz false
	// http://localhost:8080/ false
	// http://10.0.0.5/healthz true
}
