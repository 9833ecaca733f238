package zone

import (
	"bytes"
	"io/fs"
	"math"
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

// entry is one entry of a master file as scanEntries sees it: a record or
// a directive, possibly spanning lines inside parentheses.
type entry struct {
	// off is where the line holding the entry's first token starts, and
	// line that line's number (from 1).
	off, line int
	// owner is set when the first token starts the line: the entry names
	// its owner (or is a directive) rather than reusing the previous one.
	owner bool
	// tok1 and tok2 are the first two tokens as written (quotes and
	// escapes kept); tok2 is nil for a one-token entry.
	tok1, tok2 []byte
}

// token is a token of a master file entry (quotes and escapes kept), as
// offsets into the data.
type token struct{ start, end int }

func (t token) text(data []byte) []byte { return data[t.start:t.end] }

// scanEntries calls fn for every entry of data, in order, until fn returns
// false. It knows just enough of RFC 1035's syntax (comments, quotes,
// escapes, parentheses) to find where each entry starts; it allocates
// only its list of tokens.
func scanEntries(data []byte, fn func(e entry) bool) {
	scanTokens(data, 2, func(e entry, toks []token) bool {
		e.tok1 = toks[0].text(data)
		if len(toks) > 1 {
			e.tok2 = toks[1].text(data)
		}
		return fn(e)
	})
}

// scanTokens is scanEntries with the tokens of the entry (tok1 and tok2
// left unset): all of them, or on lines with nothing special at least the
// first want when want > 0. toks is reused for the next entry.
func scanTokens(data []byte, want int, fn func(e entry, toks []token) bool) {
	var buf [16]token
	toks := buf[:0]
	line := 1
	lineOff := 0
	i := 0
	for i < len(data) {
		toks = toks[:0]
		// Most lines hold a whole entry with nothing special in it: no
		// quotes, parentheses, comments or escapes. Those are split
		// into fields directly.
		end := len(data)
		if nl := bytes.IndexByte(data[i:], '\n'); nl >= 0 {
			end = i + nl
		}
		if l := data[i:end]; bytes.IndexAny(l, "\"();\\") < 0 {
			for j := i; j < end && (want <= 0 || len(toks) < want); {
				for j < end && blank(data[j]) {
					j++
				}
				if j == end {
					break
				}
				start := j
				for j < end && !blank(data[j]) {
					j++
				}
				toks = append(toks, token{start, j})
			}
			if len(toks) > 0 && !fn(entry{off: i, line: line, owner: toks[0].start == i}, toks) {
				return
			}
			i, line = end+1, line+1
			lineOff = i
			continue
		}
		e := entry{line: line}
		tokStart := -1
		quoted, parens := false, 0
		begin := func(at int) {
			if tokStart < 0 {
				tokStart = at
				if len(toks) == 0 {
					e.off, e.line = lineOff, line
					e.owner = at == lineOff
				}
			}
		}
		flush := func(at int) {
			if tokStart >= 0 {
				toks = append(toks, token{tokStart, at})
				tokStart = -1
			}
		}
	scan:
		for ; i < len(data); i++ {
			c := data[i]
			switch {
			case c == '\\' && i+1 < len(data):
				begin(i)
				i++
				if data[i] == '\n' {
					line++
					lineOff = i + 1
				}
			case quoted:
				if c == '"' {
					quoted = false
				} else if c == '\n' {
					line++
					lineOff = i + 1
				}
			case c == '"':
				begin(i)
				quoted = true
			case c == ';':
				flush(i)
				for i < len(data) && data[i] != '\n' {
					i++
				}
				i-- // let the newline be seen
			case c == '(':
				flush(i)
				parens++
			case c == ')':
				flush(i)
				if parens > 0 {
					parens--
				}
			case c == '\n':
				flush(i)
				line++
				lineOff = i + 1
				if parens == 0 {
					i++
					break scan
				}
			case blank(c):
				flush(i)
			default:
				begin(i)
			}
		}
		flush(i)
		if len(toks) > 0 && !fn(e, toks) {
			return
		}
	}
}

// blank reports whether c separates tokens.
func blank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// directive returns the upper-case name of the directive tok ("$TTL"), or
// "" when tok is not a directive.
func directive(tok []byte) string {
	if len(tok) < 2 || tok[0] != '$' {
		return ""
	}
	switch {
	case bytes.EqualFold(tok, []byte("$ORIGIN")):
		return "$ORIGIN"
	case bytes.EqualFold(tok, []byte("$TTL")):
		return "$TTL"
	case bytes.EqualFold(tok, []byte("$INCLUDE")):
		return "$INCLUDE"
	case bytes.EqualFold(tok, []byte("$GENERATE")):
		return "$GENERATE"
	}
	return ""
}

// recordPositions returns the file and starting line of every resource record
// a master file yields, in the order miekg/dns's ZoneParser returns them,
// following $INCLUDE and counting $GENERATE (see scanEntries). depth bounds
// $INCLUDE recursion as the parser does. It stops once it has limit
// positions.
func recordPositions(fsys fs.FS, file string, data []byte, depth, limit int) []Pos {
	var out []Pos
	scanPositions(fsys, file, data, depth, limit, func(f string, line int) { out = append(out, Pos{f, line}) })
	return out
}

// lines is recordPositions in compact form: a line per record, and the
// file of each (an index into files) only when there are several.
type lines struct {
	files []string
	file  []uint16 // nil when every record is in files[0]
	line  []int32
}

func (l *lines) len() int { return len(l.line) }

func (l *lines) at(i int) (file uint16, line int32) {
	if i >= len(l.line) {
		return 0, 0
	}
	if l.file != nil {
		file = l.file[i]
	}
	return file, l.line[i]
}

// recordLines is recordPositions for every record, compact.
func recordLines(fsys fs.FS, file string, data []byte) *lines {
	l := &lines{files: []string{file}, line: make([]int32, 0, bytes.Count(data, []byte{'\n'}))}
	scanPositions(fsys, file, data, 0, math.MaxInt, func(f string, line int) {
		if f != file || l.file != nil {
			if l.file == nil {
				l.file = make([]uint16, len(l.line), cap(l.line))
			}
			fi := -1
			for i, g := range l.files {
				if g == f {
					fi = i
				}
			}
			if fi < 0 {
				fi = len(l.files)
				l.files = append(l.files, f)
			}
			l.file = append(l.file, uint16(fi))
		}
		l.line = append(l.line, int32(line))
	})
	return l
}

// scanPositions calls add with the position of each record, as
// recordPositions returns them, and returns how many it found.
func scanPositions(fsys fs.FS, file string, data []byte, depth, limit int, add func(file string, line int)) int {
	n := 0
	scanEntries(data, func(e entry) bool {
		if n >= limit {
			return false
		}
		switch directive(e.tok1) {
		case "$ORIGIN", "$TTL":
		case "$INCLUDE":
			if e.tok2 == nil || depth >= 7 {
				break
			}
			inc := includePath(fsys, file, unquote(string(e.tok2)))
			if b, err := readFile(fsys, inc); err == nil {
				n += scanPositions(fsys, inc, b, depth+1, limit-n, add)
			}
		case "$GENERATE":
			c := 0
			if e.tok2 != nil {
				c = generateCount(string(e.tok2))
			}
			for range min(c, limit-n) {
				add(file, e.line)
				n++
			}
		default:
			add(file, e.line)
			n++
		}
		return true
	})
	return n
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

// An Include is a file a master file reads with $INCLUDE.
type Include struct {
	// From and Line are where the $INCLUDE is.
	From string
	Line int
	// Name is the target as written; Path is it resolved as the parser
	// resolves it (against From's directory, in fsys when non-nil).
	Name, Path string
	// Data is the file's content; Err why it could not be read.
	Data []byte
	Err  error
}

// Includes lists every file the master file at file (holding data)
// reads with $INCLUDE, followed into the files included, as deep as the
// parser follows them, each file once.
func Includes(fsys fs.FS, file string, data []byte) []Include {
	var out []Include
	seen := map[string]bool{}
	var walk func(file string, data []byte, depth int)
	walk = func(file string, data []byte, depth int) {
		scanEntries(data, func(e entry) bool {
			if directive(e.tok1) != "$INCLUDE" || e.tok2 == nil || depth >= 7 {
				return true
			}
			name := unquote(string(e.tok2))
			inc := Include{From: file, Line: e.line, Name: name, Path: includePath(fsys, file, name)}
			if seen[inc.Path] {
				return true
			}
			seen[inc.Path] = true
			inc.Data, inc.Err = readFile(fsys, inc.Path)
			out = append(out, inc)
			if inc.Err == nil {
				walk(inc.Path, inc.Data, depth+1)
			}
			return true
		})
	}
	walk(file, data, 0)
	return out
}
