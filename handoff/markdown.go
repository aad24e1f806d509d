package handoff

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// doc builds a Markdown document. Free text recorded by the session is
// Markdown already; doc only keeps it from breaking the structure around
// it (continuation lines indented under their bullet, code spans and
// fences sized past any backticks they hold).
type doc struct{ bytes.Buffer }

func (d *doc) line(format string, args ...any) {
	fmt.Fprintf(&d.Buffer, format, args...)
	d.WriteByte('\n')
}

// blank ends a paragraph: it writes an empty line unless there is one
// already.
func (d *doc) blank() {
	if d.Len() == 0 || bytes.HasSuffix(d.Bytes(), []byte("\n\n")) {
		return
	}
	if !bytes.HasSuffix(d.Bytes(), []byte("\n")) {
		d.WriteByte('\n')
	}
	d.WriteByte('\n')
}

func (d *doc) heading(level int, title string) {
	d.blank()
	d.WriteString(strings.Repeat("#", level))
	d.WriteByte(' ')
	d.WriteString(title)
	d.WriteString("\n\n")
}

// bullet writes "- text", indenting continuation lines of text so they stay
// inside the bullet.
func (d *doc) bullet(text string) { d.bulletAt(0, text) }

func (d *doc) bulletAt(indent int, text string) {
	pad := strings.Repeat("  ", indent)
	d.WriteString(pad)
	d.WriteString("- ")
	d.WriteString(indentRest(strings.TrimSpace(text), pad+"  "))
	d.WriteByte('\n')
}

// fence writes body as a fenced block indented by indent levels, with a
// fence longer than any backtick run inside it.
func (d *doc) fence(indent int, lang, body string) {
	pad := strings.Repeat("  ", indent)
	f := strings.Repeat("`", max(3, longestRun(body, '`')+1))
	d.WriteString(pad + f + lang + "\n")
	for _, l := range strings.Split(body, "\n") {
		if l == "" {
			d.WriteString("\n")
			continue
		}
		d.WriteString(pad + l + "\n")
	}
	d.WriteString(pad + f + "\n")
}

func indentRest(s, pad string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" {
			lines[i] = ""
			continue
		}
		lines[i] = pad + strings.TrimRight(lines[i], " \t\r")
	}
	return strings.Join(lines, "\n")
}

// code returns s as an inline code span. Line breaks become spaces (a code
// span cannot hold them).
func code(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	f := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || s == "" {
		s = " " + s + " "
	}
	return f + s + f
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// argv renders a command's arguments as one shell-quoted line, so it can be
// read and pasted; cairn itself never runs it through a shell.
func argv(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if shellSafe.MatchString(a) {
			parts[i] = a
		} else {
			parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}

// Output excerpt limits: the tail of a check's output is where the failure
// usually is.
const (
	excerptLines = 20
	excerptBytes = 2000
)

// excerpt returns the tail of a check's output and how many lines it left
// out.
func excerpt(out string) (string, int) {
	out = strings.TrimRight(strings.ReplaceAll(out, "\r\n", "\n"), " \t\n")
	out = strings.TrimLeft(out, "\n")
	if out == "" {
		return "", 0
	}
	lines := strings.Split(out, "\n")
	omitted := 0
	if len(lines) > excerptLines {
		omitted = len(lines) - excerptLines
		lines = lines[omitted:]
	}
	for len(lines) > 1 && len(strings.Join(lines, "\n")) > excerptBytes {
		lines = lines[1:]
		omitted++
	}
	s := strings.Join(lines, "\n")
	if len(s) > excerptBytes { // one very long line: keep its end
		s = "…" + strings.ToValidUTF8(s[len(s)-excerptBytes:], "")
	}
	return strings.ToValidUTF8(s, "�"), omitted
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
