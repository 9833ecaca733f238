package simulate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// scanLine decodes one query-log line into l without reflection or
// allocation beyond the strings kept: the log's lines are flat JSON
// objects (querylog's line type) whose strings need no unescaping. It
// reports false for anything else (an escape, a nested object, bad
// syntax), and the caller decodes that line with encoding/json instead,
// which also says what is wrong with it.
func scanLine(b []byte, l *logLine) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := scanString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			v, j, ok := scanString(b, i)
			if !ok {
				return false
			}
			switch string(key) {
			case "time":
				l.Time = string(v)
			case "client":
				l.Client = string(v)
			case "ecs":
				l.ECS = string(v)
			case "name":
				l.Name = string(v)
			case "type":
				l.Type = string(v)
			case "pool":
				l.Pool = string(v)
			case "scope", "ttl":
				return false // a string where a number belongs: let encoding/json say so
			}
			i = j
		case '[':
			j := bytes.IndexByte(b[i:], ']')
			if j < 0 || bytes.IndexByte(b[i:i+j], '\\') >= 0 || bytes.IndexByte(b[i:i+j], '{') >= 0 || bytes.IndexByte(b[i+1:i+j], '[') >= 0 {
				return false
			}
			i += j + 1
		case '{':
			return false
		default: // a number, true, false or null
			j := i
			for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ' ' && b[j] != '\t' {
				j++
			}
			lit := string(b[i:j])
			switch string(key) {
			case "scope":
				if lit != "null" {
					n, err := strconv.Atoi(lit)
					if err != nil {
						return false
					}
					l.Scope = &n
				}
			case "ttl":
				if lit != "null" {
					f, err := strconv.ParseFloat(lit, 64)
					if err != nil {
						return false
					}
					l.TTL = &f
				}
			default:
				if !json.Valid(b[i:j]) {
					return false
				}
			}
			i = j
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		if b[i] == '}' {
			return skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return false
		}
		i = skipSpace(b, i+1)
	}
}

// scanString reads the string starting at b[i] (a quote), without
// escapes; it returns its contents and the index after it.
func scanString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
