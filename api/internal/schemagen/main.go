// Command schemagen writes api/schema.json from package api (go generate
// ./api runs it in the api folder).
package main

import (
	"log"
	"os"

	"github.com/cairn-dev/cairn/internal/apischema"
)

func main() {
	b, err := apischema.Generate()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("schema.json", b, 0o644); err != nil {
		log.Fatal(err)
	}
}
