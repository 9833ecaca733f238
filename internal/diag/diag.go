// Package diag holds file:line diagnostics: the errors and warnings that
// loading a configuration, a zone or a policy produces, reported all at once.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a configuration or a file it names,
// located at a file and line so an operator can go straight to it.
type Problem struct {
	File string
	Line int // 0 when the problem is about the file as a whole
	Msg  string
}

func (p Problem) String() string {
	switch {
	case p.File == "":
		return p.Msg
	case p.Line <= 0:
		return p.File + ": " + p.Msg
	default:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
}

// Problems is every problem found while loading a configuration. A load
// reports all of them at once rather than stopping at the first.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Add records a problem at file:line.
func (ps *Problems) Add(file string, line int, format string, args ...any) {
	*ps = append(*ps, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// Err returns ps as an error, or nil when there are none. Problems are
// sorted by file and line so the output reads top to bottom.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].File != ps[j].File {
			return ps[i].File < ps[j].File
		}
		return ps[i].Line < ps[j].Line
	})
	return ps
}
