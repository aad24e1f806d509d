package session

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
)

// The secret rules: which values of a structured map cairn never stores,
// and which strings verify --secrets reports in content.
//
// Structured maps are the records of values a session keeps under
// host-chosen keys: the session's agent and metadata maps and each
// artifact's metadata. Normalize scrubs them on every path that writes a
// session (Save, Fork, Import). Content (messages, artifact data, trace
// data, loop state, step and subagent results) is kept byte for byte and
// never scrubbed: ScanSecrets only reports what it finds there. Recorded
// processes keep environment variable names only (env_keys), never values.
//
// A member is dropped, that is removed with its key (as it always was for
// the top-level keys of agent and metadata), when
//
//   - its key is credential-named (IsSecretKey), or
//   - its value is a string holding a credential-shaped token
//     (SecretRules) anywhere in it,
//
// at every depth of a JSON value: objects inside objects and arrays are
// scrubbed the same way, and an array element that is such a string is
// removed from the array. The depth is not capped: a Value has passed the
// JSON check, whose nesting limit bounds the walk. A JSON value without
// anything to drop is kept byte for byte; one with something to drop is
// re-written with that member or element cut out and nothing else changed.
// A metadata null in a delta is kept even under a credential-named key: it
// stores nothing and deletes what an older cairn may have kept there.

// SecretRule is one credential format: its name, as verify reports it, and
// the pattern of the strings it matches.
type SecretRule struct {
	Name    string
	Pattern *regexp.Regexp
}

// SecretRules are the well-known credential formats. A string matching one
// anywhere is credential-shaped. Each pattern needs a distinctive prefix
// and enough characters after it that ordinary words ("sk-learn",
// "AKIAEXAMPLE", "eyJhbGciOiJIUzI1NiJ9" alone) do not match.
var SecretRules = []SecretRule{
	{"anthropic_api_key", regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{20,}`)},
	{"openai_api_key", regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`)},
	{"stripe_key", regexp.MustCompile(`\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}`)},
	{"github_token", regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}`)},
	{"github_pat", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}`)},
	{"gitlab_token", regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`)},
	{"aws_access_key_id", regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)},
	{"google_api_key", regexp.MustCompile(`\bAIza[A-Za-z0-9_-]{35}`)},
	{"slack_token", regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
	{"npm_token", regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`)},
	{"huggingface_token", regexp.MustCompile(`\bhf_[A-Za-z0-9]{34,}`)},
	{"private_key", regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	{"url_password", regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@"'<>]+:[^\s/@"'<>]+@`)},
}

// SecretMatch is one credential-shaped string found in some bytes.
type SecretMatch struct {
	Rule   string // the SecretRule's name
	Offset int    // where it starts, in bytes
	Len    int    // its length in bytes
}

// FindSecrets returns the credential-shaped strings in b, in order of
// offset; where matches of two rules overlap, the earlier (then the
// longer) is kept.
func FindSecrets(b []byte) []SecretMatch {
	var out []SecretMatch
	for _, r := range SecretRules {
		for _, loc := range r.Pattern.FindAllIndex(b, -1) {
			out = append(out, SecretMatch{Rule: r.Name, Offset: loc[0], Len: loc[1] - loc[0]})
		}
	}
	if len(out) < 2 {
		return out
	}
	// Few matches in practice: an insertion sort, then drop overlaps.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	kept := out[:1]
	for _, m := range out[1:] {
		last := kept[len(kept)-1]
		if m.Offset < last.Offset+last.Len {
			continue
		}
		kept = append(kept, m)
	}
	return kept
}

func less(a, b SecretMatch) bool {
	if a.Offset != b.Offset {
		return a.Offset < b.Offset
	}
	return a.Len > b.Len
}

// IsSecretValue reports whether s holds a credential-shaped string.
func IsSecretValue(s string) bool {
	for _, r := range SecretRules {
		if r.Pattern.MatchString(s) {
			return true
		}
	}
	return false
}

// RedactSecret shows a found secret without giving it away: its first
// characters (at most 4, and at most a quarter of it), then "…".
func RedactSecret(s []byte) string {
	n := min(4, len(s)/4)
	for n > 0 && !isPrintableASCII(s[:n]) {
		n--
	}
	return string(s[:n]) + "…"
}

func isPrintableASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// secretSuffixes end a key's last word that names a credential:
// "token" ("github_token", "AccessToken"), "password", "secret", ...
var secretSuffixes = []string{
	"token", "secret", "secrets", "password", "passwd", "passphrase",
	"credential", "credentials", "cookie", "cookies", "authorization",
	"apikey", "privatekey", "secretkey", "accesskey", "authkey",
}

// secretKeyQualifiers make a last word "key" a credential: "api_key",
// "aws_secret_access_key", "private-key", "ssh_key". Any other key
// ("sort_key", "primary_key", "cache_key", "key") is kept.
var secretKeyQualifiers = map[string]bool{
	"api": true, "secret": true, "private": true, "access": true, "auth": true,
	"client": true, "signing": true, "encryption": true, "master": true, "ssh": true,
}

// secretNames are whole key names (after normalising) that name a
// credential without a credential word at the end.
var secretNames = map[string]bool{
	"auth": true, "creds": true, "bearer": true, "pat": true,
}

// harmlessTokens are "<word>_token" keys that name a tokenizer's special
// token or a paging cursor, not a credential ("eos_token": "</s>").
var harmlessTokens = map[string]bool{
	"bos": true, "eos": true, "pad": true, "unk": true, "sep": true, "cls": true,
	"mask": true, "stop": true, "page": true,
}

// IsSecretKey reports whether the value under key k in a structured map is
// never stored. The key is split into words at anything not a letter or
// digit and at lower-to-upper case changes ("OPENAI_API_KEY",
// "Auth-Token", "clientSecret", "aws.secret.access.key" all split), and
// compared in lower case. It is a credential when
//
//   - its last word ends in token, secret(s), password, passwd,
//     passphrase, credential(s), cookie(s), authorization, apikey,
//     privatekey, secretkey, accesskey or authkey (but not a tokenizer's
//     or a pager's token: bos/eos/pad/unk/sep/cls/mask/stop/page_token);
//   - its last word is "key" after api, secret, private, access, auth,
//     client, signing, encryption, master or ssh ("sort_key",
//     "primary_key" and "key" alone are kept);
//   - the whole key is auth, creds, bearer or pat.
//
// Plurals of token ("max_tokens", "input_tokens") and words that only
// start with one ("token_count", "password_policy") are kept.
func IsSecretKey(k string) bool {
	w := keyWords(k)
	if len(w) == 0 {
		return false
	}
	last := w[len(w)-1]
	if len(w) == 1 && secretNames[last] {
		return true
	}
	if last == "key" {
		return len(w) > 1 && secretKeyQualifiers[w[len(w)-2]]
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(last, s) {
			if s == "token" && last == "token" && len(w) > 1 && harmlessTokens[w[len(w)-2]] {
				return false
			}
			return true
		}
	}
	return false
}

// keyWords splits a key into lower-case words.
func keyWords(k string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	var prev rune
	for _, r := range k {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return words
}

// ScrubMap drops from m, in place, every member whose key is
// credential-named or whose value holds a credential-shaped string, and
// cuts such members and elements out of the JSON values it keeps. keepNull
// keeps a null under any key (a delta's metadata, where null deletes).
func ScrubMap(m map[string]Value, keepNull bool) {
	for k, v := range m {
		if keepNull && isNull(v) {
			continue
		}
		if IsSecretKey(k) {
			delete(m, k)
			continue
		}
		out, drop := ScrubValue(v)
		switch {
		case drop:
			delete(m, k)
		case out != nil:
			m[k] = out
		}
	}
}

// ScrubValue applies the rules to a JSON value that is not under a key: it
// returns drop when the value itself is a credential-shaped string, or
// else the value with the members and elements to drop cut out (nil when
// there is nothing to cut: keep v as it is). v that is not valid JSON is
// left to the JSON check (nil, false).
func ScrubValue(v Value) (out Value, drop bool) {
	if len(v) == 0 {
		return nil, false
	}
	p := scrubber{b: v}
	p.ws()
	start := p.i
	res, cut, ok := p.value()
	if !ok {
		return nil, false
	}
	if cut == cutDrop {
		return nil, true
	}
	if cut == cutNone {
		return nil, false
	}
	rest := v[p.i:]
	out = make(Value, 0, len(v))
	out = append(out, v[:start]...)
	out = append(out, res...)
	out = append(out, rest...)
	return out, false
}

const (
	cutNone = iota // keep the value's bytes as they are
	cutSome        // res holds the value with members cut out
	cutDrop        // the value itself is a secret
)

// scrubber walks valid JSON text, returning each value's bytes with what
// the rules drop cut out. It trusts the text to be valid (checkValue runs
// json.Valid first) and fails safe (ok false) on anything it cannot read.
type scrubber struct {
	b []byte
	i int
}

func (p *scrubber) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *scrubber) value() (res []byte, cut int, ok bool) {
	if p.i >= len(p.b) {
		return nil, 0, false
	}
	start := p.i
	switch p.b[p.i] {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		s, ok := p.str()
		if !ok {
			return nil, 0, false
		}
		if IsSecretValue(s) {
			return nil, cutDrop, true
		}
		return p.b[start:p.i], cutNone, true
	default:
		for p.i < len(p.b) && !strings.ContainsRune(",]} \t\n\r", rune(p.b[p.i])) {
			p.i++
		}
		return p.b[start:p.i], cutNone, p.i > start
	}
}

// str reads a string and returns its text, escapes decoded as far as the
// rules need them: a secret written with escapes is still found.
func (p *scrubber) str() (string, bool) {
	start := p.i
	p.i++
	esc := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '\\':
			esc = true
			p.i++
		case c == '"':
			raw := p.b[start:p.i]
			if !esc {
				return string(raw[1 : len(raw)-1]), true
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

func (p *scrubber) object() ([]byte, int, bool) {
	start := p.i
	p.i++ // {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return p.b[start:p.i], cutNone, true
	}
	var kept [][]byte
	cut := false
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, 0, false
		}
		mstart := p.i
		key, ok := p.str()
		if !ok {
			return nil, 0, false
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, 0, false
		}
		p.i++
		p.ws()
		vstart := p.i
		res, c, ok := p.value()
		if !ok {
			return nil, 0, false
		}
		vend := p.i
		switch {
		case IsSecretKey(key) || c == cutDrop:
			cut = true
		case c == cutSome:
			cut = true
			m := append([]byte(nil), p.b[mstart:vstart]...)
			kept = append(kept, append(m, res...))
		default:
			kept = append(kept, p.b[mstart:vend])
		}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			break
		}
		return nil, 0, false
	}
	if !cut {
		return p.b[start:p.i], cutNone, true
	}
	out := []byte{'{'}
	out = append(out, bytes.Join(kept, []byte{','})...)
	return append(out, '}'), cutSome, true
}

func (p *scrubber) array() ([]byte, int, bool) {
	start := p.i
	p.i++ // [
	var kept [][]byte
	cut := false
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return p.b[start:p.i], cutNone, true
	}
	for {
		p.ws()
		estart := p.i
		res, c, ok := p.value()
		if !ok {
			return nil, 0, false
		}
		switch c {
		case cutDrop:
			cut = true
		case cutSome:
			cut = true
			kept = append(kept, res)
		default:
			kept = append(kept, p.b[estart:p.i])
		}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			break
		}
		return nil, 0, false
	}
	if !cut {
		return p.b[start:p.i], cutNone, true
	}
	out := []byte{'['}
	out = append(out, bytes.Join(kept, []byte{','})...)
	return append(out, ']'), cutSome, true
}
