package workspace

import (
	"path"
	"strings"

	"github.com/cairn-dev/cairn/internal/layout"
)

// builtinIgnored names the directories that are never indexed nor watched,
// at any depth. .git and .cairn are ignored whether they are directories or
// files (a git worktree's .git is a file).
var builtinIgnored = []string{".git", layout.Dir, "node_modules", "target", "__pycache__"}

// rule is one parsed ignore pattern.
type rule struct {
	negate   bool
	dirOnly  bool
	anchored bool     // the pattern contained a '/' other than a trailing one: match the whole path
	segs     []string // the pattern split on '/', for anchored rules
	base     string   // the pattern, for unanchored rules: match the last path element
}

// matcher decides whether a workspace path is ignored. It implements the
// subset of gitignore(5) cairn needs: blank lines and '#' comments, '\'
// escapes, '!' negation (the last matching rule wins), a trailing '/' for
// directories only, a '/' anywhere else anchoring the pattern at the root,
// '*', '?', '[...]' within one path element and '**' across elements.
// Not supported: nested .gitignore files, core.excludesFile and
// .git/info/exclude.
type matcher struct {
	rules []rule
}

// parseIgnore parses gitignore text (one pattern a line) into rules,
// skipping malformed patterns; it returns the skipped lines.
func parseIgnore(lines []string) ([]rule, []string) {
	var rules []rule
	var bad []string
	for _, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		// Trailing spaces are dropped unless escaped.
		for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
			line = line[:len(line)-1]
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r rule
		if strings.HasPrefix(line, "!") {
			r.negate = true
			line = line[1:]
		} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly = true
			line = strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if strings.Contains(line, "/") {
			r.anchored = true
			line = strings.TrimPrefix(line, "/")
			r.segs = strings.Split(line, "/")
		} else {
			r.base = line
		}
		if !validPattern(r) {
			bad = append(bad, line)
			continue
		}
		rules = append(rules, r)
	}
	return rules, bad
}

func validPattern(r rule) bool {
	if !r.anchored {
		_, err := path.Match(r.base, "")
		return err == nil
	}
	for _, s := range r.segs {
		if _, err := path.Match(s, ""); err != nil {
			return false
		}
	}
	return true
}

// ignored reports whether rel (slash-separated, relative to the root, not
// "") is ignored, assuming its ancestors are not.
func (m *matcher) ignored(rel string, isDir bool) bool {
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	for _, b := range builtinIgnored {
		if base == b && (isDir || b == ".git" || b == layout.Dir) {
			return true
		}
	}
	ignored := false
	var segs []string
	for i := range m.rules {
		r := &m.rules[i]
		if r.negate != ignored || (r.dirOnly && !isDir) {
			// A rule that cannot change the outcome is skipped.
			continue
		}
		var ok bool
		if r.anchored {
			if segs == nil {
				segs = strings.Split(rel, "/")
			}
			ok = matchSegs(r.segs, segs)
		} else {
			ok, _ = path.Match(r.base, base)
		}
		if ok {
			ignored = !r.negate
		}
	}
	return ignored
}

// ignoredPath reports whether rel or any of its ancestors is ignored; the
// ancestors are directories.
func (m *matcher) ignoredPath(rel string, isDir bool) bool {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && m.ignored(rel[:i], true) {
			return true
		}
	}
	return m.ignored(rel, isDir)
}

// matchSegs matches pattern elements p against path elements s; "**"
// matches zero or more whole elements, except that a trailing "**" needs
// at least one.
func matchSegs(p, s []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			for len(p) > 1 && p[1] == "**" {
				p = p[1:]
			}
			if len(p) == 1 {
				return len(s) > 0
			}
			for i := 0; i <= len(s); i++ {
				if matchSegs(p[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 {
			return false
		}
		if ok, _ := path.Match(p[0], s[0]); !ok {
			return false
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}
