package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-dev/cairn/session"
)

// defaultShowMessages is how many of the last messages show prints.
const defaultShowMessages = 10

// maxShownChars bounds each message show prints, so one long tool output
// does not bury the rest of the tail.
const maxShownChars = 2000

// renderTail prints the last n messages as "[index] role: content". A
// message that is not {"role", "content": string} is printed as compact
// JSON.
func renderTail(w io.Writer, msgs []session.Value, n int64) {
	if n == 0 || len(msgs) == 0 {
		return
	}
	first := max(int64(len(msgs))-n, 0)
	if first > 0 {
		fmt.Fprintf(w, "\nlast %d of %d messages:\n", int64(len(msgs))-first, len(msgs))
	} else {
		fmt.Fprintf(w, "\nmessages:\n")
	}
	for i := first; i < int64(len(msgs)); i++ {
		fmt.Fprintf(w, "[%d] %s\n", i, indent(clipText(messageText(msgs[i]))))
	}
}

// messageText renders one message for people.
func messageText(m session.Value) string {
	var chat struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(m, &chat) == nil && chat.Role != "" {
		var text string
		if json.Unmarshal(chat.Content, &text) == nil {
			return chat.Role + ": " + text
		}
		if len(chat.Content) > 0 {
			var b bytes.Buffer
			if json.Compact(&b, chat.Content) == nil {
				return chat.Role + ": " + b.String()
			}
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, m) != nil {
		return string(m)
	}
	return b.String()
}

// clipText cuts s to maxShownChars runes, saying how much is left out.
func clipText(s string) string {
	r := []rune(s)
	if len(r) <= maxShownChars {
		return s
	}
	return string(r[:maxShownChars]) + fmt.Sprintf(" … (%d more characters; cairn messages prints them all)", len(r)-maxShownChars)
}

// indent puts continuation lines under the first line's text.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
