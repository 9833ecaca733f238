package tsig

import (
	"errors"
	"fmt"
	"strings"
)

// token is one lexical item of a BIND key file.
type token struct {
	text   string
	quoted bool // a "string"; its text is without the quotes
	line   int
}

// lex splits BIND's named.conf syntax into words, "strings" and the
// punctuation { } ;, dropping # and // line comments and /* */ blocks.
func lex(data []byte, name string) ([]token, error) {
	s := string(data)
	var toks []token
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' || strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			start := line
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("%s:%d: unterminated /* comment", name, start)
			}
			line += strings.Count(s[i:i+2+end], "\n")
			i += 2 + end + 2
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, token{text: string(c), line: line})
			i++
		case c == '"':
			start := line
			j := i + 1
			var b strings.Builder
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				if s[j] == '\n' {
					line++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%s:%d: unterminated string", name, start)
			}
			toks = append(toks, token{text: b.String(), quoted: true, line: start})
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n\f\v{};\"#", rune(s[j])) &&
				!strings.HasPrefix(s[j:], "//") && !strings.HasPrefix(s[j:], "/*") {
				j++
			}
			toks = append(toks, token{text: s[i:j], line: line})
			i = j
		}
	}
	return toks, nil
}

// ParseFile reads TSIG keys in BIND's format, as tsig-keygen writes them:
//
//	key "xfr-key" {
//		algorithm hmac-sha256;
//		secret "4JtQ3pJ2kH2pIq4fV7m4iP0l5D6iC3fC1o8yZ5v1Qh0=";
//	};
//
// A file may hold several key blocks and #, // and /* */ comments; names
// may be quoted or not. name labels errors, which read "name:line: reason".
func ParseFile(data []byte, name string) ([]Key, error) {
	toks, err := lex(data, name)
	if err != nil {
		return nil, err
	}
	var keys []Key
	seen := map[string]int{} // canonical name -> line
	eof := 1 + strings.Count(string(data), "\n")
	i := 0
	next := func() (token, bool) {
		if i >= len(toks) {
			return token{line: eof}, false
		}
		t := toks[i]
		i++
		return t, true
	}
	punct := func(t token, p string) bool { return !t.quoted && t.text == p }
	for i < len(toks) {
		kw, _ := next()
		if kw.quoted || !strings.EqualFold(kw.text, "key") {
			return nil, fmt.Errorf("%s:%d: expected \"key\", found %q", name, kw.line, kw.text)
		}
		nt, ok := next()
		if !ok || (!nt.quoted && (nt.text == "{" || nt.text == "}" || nt.text == ";")) {
			return nil, fmt.Errorf("%s:%d: key without a name", name, kw.line)
		}
		if t, ok := next(); !ok || !punct(t, "{") {
			return nil, fmt.Errorf("%s:%d: expected \"{\" after key %q", name, nt.line, nt.text)
		}
		var alg, secret string
		var algLine, secretLine int
		for {
			st, ok := next()
			if !ok {
				return nil, fmt.Errorf("%s:%d: unterminated key %q: missing \"};\"", name, kw.line, nt.text)
			}
			if punct(st, "}") {
				break
			}
			val, ok := next()
			if !ok {
				return nil, fmt.Errorf("%s:%d: unterminated key %q: missing \"};\"", name, kw.line, nt.text)
			}
			if !val.quoted && (val.text == "{" || val.text == "}" || val.text == ";") {
				return nil, fmt.Errorf("%s:%d: %s without a value", name, st.line, st.text)
			}
			if t, ok := next(); !ok || !punct(t, ";") {
				return nil, fmt.Errorf("%s:%d: missing \";\" after %s", name, val.line, st.text)
			}
			switch strings.ToLower(st.text) {
			case "algorithm":
				if algLine != 0 {
					return nil, fmt.Errorf("%s:%d: second algorithm in key %q (first on line %d)", name, st.line, nt.text, algLine)
				}
				alg, algLine = val.text, st.line
			case "secret":
				if secretLine != 0 {
					return nil, fmt.Errorf("%s:%d: second secret in key %q (first on line %d)", name, st.line, nt.text, secretLine)
				}
				secret, secretLine = val.text, st.line
			default:
				return nil, fmt.Errorf("%s:%d: unknown statement %q in key %q (want algorithm, secret)", name, st.line, st.text, nt.text)
			}
		}
		if t, ok := next(); !ok || !punct(t, ";") {
			return nil, fmt.Errorf("%s:%d: missing \";\" after the \"}\" of key %q", name, t.line, nt.text)
		}
		switch {
		case algLine == 0:
			return nil, fmt.Errorf("%s:%d: key %q has no algorithm", name, kw.line, nt.text)
		case secretLine == 0:
			return nil, fmt.Errorf("%s:%d: key %q has no secret", name, kw.line, nt.text)
		}
		k, err := NewKey(nt.text, alg, secret)
		if err != nil {
			line := nt.line
			var ke *keyError
			if errors.As(err, &ke) {
				switch ke.field {
				case "algorithm":
					line = algLine
				case "secret":
					line = secretLine
				}
			}
			return nil, fmt.Errorf("%s:%d: key %q: %v", name, line, nt.text, err)
		}
		if first, dup := seen[k.Name]; dup {
			return nil, fmt.Errorf("%s:%d: duplicate key %q (first on line %d)", name, kw.line, nt.text, first)
		}
		seen[k.Name] = kw.line
		keys = append(keys, k)
	}
	return keys, nil
}
