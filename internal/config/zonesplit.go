package config

import (
	"bytes"
	"strings"

	"github.com/steer-dns/steer/internal/diag"
	"go.yaml.in/yaml/v3"
)

// A hosting provider's file lists 100,000 zones or more, most written
// alike ("- { origin: example.com., file: zones/example.com.zone }"), and
// building YAML's tree of their items (a node, its position and its tag
// for every key and value) was most of the time Parse took: about 10 µs
// an item, before any zone file is read. So a long zones list is decoded
// apart (decodeZonesApart): the text is split by lines into the items of
// the top-level zones sequence and the rest (splitSeq, as a reload splits
// the records); an item written in one of the two plain shapes below is
// read directly into its Zone and the table of its key paths' lines, any
// other item is parsed, walked and decoded alone, and the rest, the
// items' lines emptied, is parsed as a file. Whatever that cannot vouch
// for (anything the split refuses, a problem in an item or in the rest,
// anchors or aliases, an item signed with DNSSEC, whose validity is
// decoded from the whole tree) gives nil, and Parse parses the whole file
// in one piece, so every problem is reported as it always was.
//
// The plain shapes are a flow mapping on the item's line, and a block
// mapping of one key a line, of the keys origin and file (each at most
// once), each value a plain scalar of letters, digits and ._/+- (not
// null) or a quoted one without escapes, with comments after them and
// comment lines between. Such an item decodes to the Zone YAML gives it.

// apartZones is the least number of zones items decoded apart: below it,
// the tree of a file is quickly built.
const apartZones = 256

// zonesApart is a file's top-level mapping without its zones items, and
// the items decoded.
type zonesApart struct {
	root  *yaml.Node
	zones []Zone
	lines []recLines
}

// decodeZonesApart decodes text's zones items apart from the rest of it,
// or returns nil (see above).
func decodeZonesApart(text string) *zonesApart {
	if len(text) < apartZones*16 {
		return nil
	}
	sp, ok := splitSeq(text, "zones", 0)
	if !ok || len(sp.chunks) < apartZones {
		return nil
	}
	za := &zonesApart{zones: make([]Zone, len(sp.chunks)), lines: make([]recLines, len(sp.chunks))}
	var shapes shapeTables
	for i, ch := range sp.chunks {
		if rel, ok := plainZone(ch.text, &za.zones[i], &shapes); ok {
			za.lines[i] = recLines{base: ch.start, rel: rel}
			continue
		}
		if !zoneAlone(ch, i, &za.zones[i], &za.lines[i]) {
			return nil
		}
	}
	if za.root = parseSkeleton(sp.skeleton, "zones", sp.keyLine); za.root == nil {
		return nil
	}
	return za
}

// parseSkeleton parses the text with the items' lines of the sequence
// under key emptied, and returns its top-level mapping when that is a
// block mapping without anchors or aliases whose key, on line keyLine,
// holds nothing.
func parseSkeleton(skeleton []byte, key string, keyLine int) *yaml.Node {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(skeleton)).Decode(&doc); err != nil {
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode || !plainTree(root) {
		return nil
	}
	v := seqValue(root, key, keyLine)
	if v == nil || v.Kind != yaml.ScalarNode || v.Tag != "!!null" || v.Value != "" || v.Style != 0 {
		return nil
	}
	return root
}

// zoneAlone parses, walks and decodes the item ch (the i-th) alone into z
// and its lines into rl, as Parse's walk and decoder of the whole file
// would. It reports false on any problem, and when the text is not
// exactly one mapping item, starting in its own text, free of anchors and
// aliases and without a dnssec key.
func zoneAlone(ch recordChunk, i int, z *Zone, rl *recLines) bool {
	var doc yaml.Node
	if err := yaml.NewDecoder(strings.NewReader(ch.text)).Decode(&doc); err != nil {
		return false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return false
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode || seq.Style&yaml.FlowStyle != 0 || len(seq.Content) != 1 || !plainTree(seq) {
		return false
	}
	item := seq.Content[0]
	if item.Kind != yaml.MappingNode || item.Line != 1 {
		return false
	}
	var probs diag.Problems
	*rl = recLines{base: ch.start, rel: map[string]int{}}
	w := keyWalker{probs: &probs, lines: rl.rel, base: 1, rec: i, seq: "zones"}
	w.walk(item, "", zoneType, false)
	if len(probs) > 0 {
		return false
	}
	if _, signed := rl.rel[".dnssec"]; signed {
		return false
	}
	return item.Decode(z) == nil
}

// shapeTables holds the key paths' tables of the plain shapes, by the
// lines of origin and file relative to the item's (-1: absent), so that
// items written alike share one (as shareRecLines would make them).
type shapeTables map[[2]int]map[string]int

func (s *shapeTables) table(origin, file int) map[string]int {
	k := [2]int{origin, file}
	if t := (*s)[k]; t != nil {
		return t
	}
	if *s == nil {
		*s = shapeTables{}
	}
	t := map[string]int{"": 0}
	if origin >= 0 {
		t[".origin"] = origin
	}
	if file >= 0 {
		t[".file"] = file
	}
	(*s)[k] = t
	return t
}

// plainZone decodes the text of an item written in a plain shape into z,
// and returns the table of its key paths' lines relative to the item's
// first line; false when the item is not in a plain shape.
func plainZone(text string, z *Zone, shapes *shapeTables) (map[string]int, bool) {
	at := [2]int{-1, -1} // the lines of origin and file
	var vals [2]string
	set := func(key, val string, line int) bool {
		k := 0
		switch key {
		case "origin":
		case "file":
			k = 1
		default:
			return false
		}
		if at[k] >= 0 {
			return false // a duplicate key is the decoder's to report
		}
		at[k], vals[k] = line, val
		return true
	}
	keyCol := -1 // the block mapping's keys' column; -2 for a flow mapping
	for line := 0; text != ""; line++ {
		l, rest, _ := strings.Cut(text, "\n")
		text = rest
		l = strings.TrimSuffix(l, "\r")
		t := strings.TrimLeft(l, " ")
		if line > 0 && (t == "" || t[0] == '#') {
			continue // comments and blank lines
		}
		col := len(l) - len(t)
		if line == 0 {
			after, ok := strings.CutPrefix(t, "- ")
			if !ok {
				return nil, false
			}
			t = strings.TrimLeft(after, " ")
			if f, ok := strings.CutPrefix(t, "{"); ok {
				if !flowPairs(f, line, set) {
					return nil, false
				}
				keyCol = -2
				continue
			}
			col = len(l) - len(t)
			keyCol = col
		}
		if col != keyCol {
			return nil, false // not a key of the item's block mapping
		}
		key, val, ok := blockPair(t)
		if !ok || !set(key, val, line) {
			return nil, false
		}
	}
	if at[0] < 0 && at[1] < 0 {
		return nil, false
	}
	*z = Zone{Origin: vals[0], File: vals[1]}
	return shapes.table(at[0], at[1]), true
}

// flowPairs reads "key: value, key: value } # comment", what follows the
// opening brace of a flow mapping on one line, into set.
func flowPairs(t string, line int, set func(key, val string, line int) bool) bool {
	for {
		t = strings.TrimLeft(t, " ")
		key, rest, ok := strings.Cut(t, ": ")
		if !ok || !plainKey(key) {
			return false
		}
		val, rest, ok := scalar(strings.TrimLeft(rest, " "), true)
		if !ok || !set(key, val, line) {
			return false
		}
		rest = strings.TrimLeft(rest, " ")
		switch {
		case strings.HasPrefix(rest, ","):
			t = rest[1:]
		case strings.HasPrefix(rest, "}"):
			return endOfLine(rest[1:])
		default:
			return false
		}
	}
}

// blockPair reads "key: value # comment", a line of a block mapping
// without its indentation.
func blockPair(t string) (key, val string, ok bool) {
	key, rest, ok := strings.Cut(t, ": ")
	if !ok || !plainKey(key) {
		return "", "", false
	}
	val, rest, ok = scalar(strings.TrimLeft(rest, " "), false)
	if !ok || !endOfLine(rest) {
		return "", "", false
	}
	return key, val, true
}

// plainKey reports whether k is a key of the plain shapes.
func plainKey(k string) bool { return k == "origin" || k == "file" }

// endOfLine reports whether t, the rest of a line, is blank or a comment
// after at least one space.
func endOfLine(t string) bool {
	u := strings.TrimLeft(t, " ")
	return u == "" || u[0] == '#' && len(u) < len(t)
}

// scalar reads the scalar at the start of t, a plain one of the safe
// characters (ending where they do) or a quoted one without escapes, and
// returns its value and what follows it.
func scalar(t string, flow bool) (val, rest string, ok bool) {
	if t == "" {
		return "", "", false
	}
	if q := t[0]; q == '\'' || q == '"' {
		for i := 1; i < len(t); i++ {
			switch c := t[i]; {
			case c == q:
				if q == '\'' && i+1 < len(t) && t[i+1] == '\'' {
					return "", "", false // an escaped quote
				}
				return t[1:i], t[i+1:], true
			case c == '\\' && q == '"', c < ' ', c > '~':
				return "", "", false
			}
		}
		return "", "", false
	}
	i := 0
	for i < len(t) && safeScalarByte(t[i]) {
		i++
	}
	if i == 0 || i < len(t) && t[i] != ' ' && !(flow && (t[i] == ',' || t[i] == '}')) {
		return "", "", false
	}
	switch v := t[:i]; v {
	case "null", "Null", "NULL", "-": // null, and (in a block) an item of a sequence
		return "", "", false
	default:
		return v, t[i:], true
	}
}

// safeScalarByte reports whether c may be anywhere in a plain scalar of
// the plain shapes, which then is the string it spells.
func safeScalarByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '/' || c == '+' || c == '-'
}
