package zone

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Pos is where a resource record was written.
type Pos struct {
	File string
	Line int
}

// recordPositions returns the file and starting line of every resource record
// a master file yields, in the order miekg/dns's ZoneParser returns them,
// following $INCLUDE and counting $GENERATE. The parser itself does not say
// where a record came from; this scanner knows just enough of RFC 1035's
// syntax (comments, quotes, escapes, parentheses) to find where each entry
// starts. depth bounds $INCLUDE recursion as the parser does.
// It stops once it has limit positions.
func recordPositions(fsys fs.FS, file string, data []byte, depth, limit int) []Pos {
	var out []Pos
	line := 1
	i := 0
	for i < len(data) && len(out) < limit {
		start := line
		var tokens []string
		var tok strings.Builder
		inTok, quoted, parens := false, false, 0
		flush := func() {
			if inTok {
				tokens = append(tokens, tok.String())
				tok.Reset()
				inTok = false
			}
		}
	entry:
		for ; i < len(data); i++ {
			c := data[i]
			switch {
			case c == '\\' && i+1 < len(data):
				if !inTok && len(tokens) == 0 {
					start = line
				}
				inTok = true
				tok.WriteByte(c)
				i++
				if data[i] == '\n' {
					line++
				}
				tok.WriteByte(data[i])
			case quoted:
				if c == '"' {
					quoted = false
				} else if c == '\n' {
					line++
				}
				tok.WriteByte(c)
			case c == '"':
				if !inTok && len(tokens) == 0 {
					start = line
				}
				quoted, inTok = true, true
				tok.WriteByte(c)
			case c == ';':
				for i < len(data) && data[i] != '\n' {
					i++
				}
				i-- // let the newline be seen
			case c == '(':
				flush()
				parens++
			case c == ')':
				flush()
				if parens > 0 {
					parens--
				}
			case c == '\n':
				line++
				if parens == 0 {
					flush()
					i++
					break entry
				}
				flush()
			case c == ' ' || c == '\t' || c == '\r':
				flush()
			default:
				if !inTok && len(tokens) == 0 {
					start = line
				}
				inTok = true
				tok.WriteByte(c)
			}
		}
		flush()
		if len(tokens) == 0 {
			continue
		}
		switch strings.ToUpper(tokens[0]) {
		case "$ORIGIN", "$TTL":
		case "$INCLUDE":
			if len(tokens) < 2 || depth >= 7 {
				continue
			}
			inc := includePath(fsys, file, unquote(tokens[1]))
			if b, err := readFile(fsys, inc); err == nil {
				out = append(out, recordPositions(fsys, inc, b, depth+1, limit-len(out))...)
			}
		case "$GENERATE":
			n := 0
			if len(tokens) >= 2 {
				n = generateCount(tokens[1])
			}
			for range min(n, limit-len(out)) {
				out = append(out, Pos{file, start})
			}
		default:
			out = append(out, Pos{file, start})
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// includePath resolves an $INCLUDE target the way the ZoneParser does.
func includePath(fsys fs.FS, from, inc string) string {
	if fsys != nil {
		if path.IsAbs(inc) {
			return strings.TrimLeft(path.Clean(inc), "/")
		}
		return path.Join(path.Dir(from), inc)
	}
	if filepath.IsAbs(inc) {
		return inc
	}
	return filepath.Join(filepath.Dir(from), inc)
}

func readFile(fsys fs.FS, p string) ([]byte, error) {
	if fsys == nil {
		return os.ReadFile(p)
	}
	return fs.ReadFile(fsys, p)
}

// generateCount returns how many records a $GENERATE range such as 1-100/2 makes.
func generateCount(r string) int {
	rng, stepS, hasStep := strings.Cut(r, "/")
	startS, stopS, ok := strings.Cut(rng, "-")
	if !ok {
		return 0
	}
	start, err1 := strconv.Atoi(startS)
	stop, err2 := strconv.Atoi(stopS)
	step := 1
	if hasStep {
		var err error
		if step, err = strconv.Atoi(stepS); err != nil || step <= 0 {
			return 0
		}
	}
	if err1 != nil || err2 != nil || stop < start {
		return 0
	}
	return (stop-start)/step + 1
}
