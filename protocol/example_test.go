package protocol_test

import (
	"context"
	"fmt"
	"log"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// Connect to the daemon of the current directory's workspace (starting one
// if needed), save a message and read the session back.
func ExampleConnect() {
	ctx := context.Background()
	c, err := protocol.Connect(ctx, ".", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	r, err := c.Save(ctx, api.SaveRequest{
		SessionID: "demo",
		Change:    &session.Change{AppendMessages: []session.Value{session.Value(`{"role":"user","content":"hi"}`)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	rs, err := c.ResumeSession(ctx, "demo")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Generation == rs.Generation, len(rs.Snapshot.Messages) > 0)
}
