package config

import (
	"io/fs"
	"reflect"
	"strings"

	"github.com/steer-dns/steer/internal/diag"
	"go.yaml.in/yaml/v3"
)

// A reload of a configuration of many records, one of which changed, need
// not decode the others again. The text of the file is split into the
// items of its top-level records sequence and the rest, the skeleton
// (splitRecords); an item whose bytes are those of an item of the
// previous configuration takes the record decoded from them, with its
// key paths moved to the item's new line and index. Only the skeleton
// (with the items blanked out, so that every line keeps its number) and
// the new items are decoded. Whatever the split cannot vouch for is left
// to Parse: the result is always what Parse gives for the same bytes.

// recordCache maps the exact text of an item of the records sequence to
// what decoding it gave.
type recordCache struct {
	items map[string]*recordItem
}

// recordItem is one item's record and key paths, independent of where in
// the file the item is.
type recordItem struct {
	// rec is the record decoded, in the Records of the configuration
	// whose cache holds the item (not a copy: 150 bytes a name); its Line
	// is that configuration's.
	rec   *Record
	lines map[string]int // recLines.rel: paths after "records[i]", relative to the item's line
	off   int            // the item's line minus the line its text starts on
}

// recordChunk is the text of one item of a top-level sequence: its lines
// from the one with its "- " to the last before the next item (comments
// and blank lines included).
type recordChunk struct {
	start, end int // first and last line, from 1
	off        int // offset of the first line in the file
	text       string
}

// recordSplit is a file's text split into its skeleton and the items of
// one top-level sequence (records, or zones: zonesplit.go).
type recordSplit struct {
	keyLine int // the line of the top-level key ("records:")
	chunks  []recordChunk
	// skeleton is the text with every line of chunks emptied.
	skeleton []byte
}

// splitRecords splits text by lines into the items of the block sequence
// under a top-level "records:" line and the rest (splitSeq).
func splitRecords(text string, hint int) (recordSplit, bool) {
	return splitSeq(text, "records", hint)
}

// splitSeq splits text by lines into the items of the block sequence
// under the top-level line "key:" and the rest. It reports false, and
// the file is left to Parse, when it cannot tell the items apart by their
// lines alone or they may not decode alone as they do in the file: tabs,
// line breaks other than LF and CRLF, directives, more than one document,
// the key written otherwise than "key:" alone on its line, or
// lines of the sequence indented otherwise than its items.
//
// An item that starts or ends inside a quoted scalar or flow collection
// that spans lines is not its own text; such a text does not decode alone,
// which the caller checks. Anchors and aliases, which tie the text of one
// item to another's, are also the caller's to refuse.
//
// hint is the number of items expected, to size the list.
func splitSeq(text, key string, hint int) (recordSplit, bool) {
	sp := recordSplit{chunks: make([]recordChunk, 0, hint)}
	if strings.IndexByte(text, '\t') >= 0 || strings.Contains(text, "\u0085") ||
		strings.Contains(text, "\u2028") || strings.Contains(text, "\u2029") ||
		strings.HasPrefix(text, "\xfe\xff") || strings.HasPrefix(text, "\xff\xfe") {
		return sp, false
	}
	for i := strings.IndexByte(text, '\r'); i >= 0; {
		if i+1 == len(text) || text[i+1] != '\n' {
			return sp, false
		}
		j := strings.IndexByte(text[i+1:], '\r')
		if j < 0 {
			break
		}
		i += 1 + j
	}

	const (
		before = iota // before the key
		gap           // after the key, before its first item
		inSeq         // in the sequence
		after         // after it
	)
	state := before
	indent := 0   // the items' indentation
	content := 0  // lines with content seen before records:
	seqStart := 0 // offset of the first item's first line
	seqEnd := 0   // offset just past the sequence's last line
	line := 0
	for off := 0; off < len(text); {
		line++
		end := strings.IndexByte(text[off:], '\n')
		next := len(text)
		if end >= 0 {
			next = off + end + 1
		}
		l := strings.TrimSuffix(strings.TrimSuffix(text[off:next], "\n"), "\r")
		if line == 1 {
			l = strings.TrimPrefix(l, "\ufeff")
		}
		trimmed := strings.TrimLeft(l, " ")
		ind := len(l) - len(trimmed)
		blank := trimmed == "" || trimmed[0] == '#'
		if ind == 0 && !blank {
			// Directives and document markers: only a "---" opening the
			// file may be.
			if l[0] == '%' {
				return sp, false
			}
			if marker(l, "---") || marker(l, "...") {
				if !(marker(l, "---") && state == before && content == 0) {
					return sp, false
				}
				off = next
				continue
			}
		}
		switch state {
		case before:
			if !blank {
				content++
			}
			if ind == 0 && isSeqKey(l, key) {
				sp.keyLine, state = line, gap
			}
		case gap:
			if blank {
				break
			}
			if !isItem(trimmed) {
				return sp, false // no items: nothing to gain
			}
			indent, state, seqStart = ind, inSeq, off
			sp.chunks = append(sp.chunks, recordChunk{start: line, off: off})
		case inSeq:
			switch {
			case blank || ind > indent:
			case ind == indent && isItem(trimmed):
				sp.chunks = append(sp.chunks, recordChunk{start: line, off: off})
			case ind == 0:
				state, seqEnd = after, off
			default:
				return sp, false
			}
		}
		if state == inSeq {
			sp.chunks[len(sp.chunks)-1].end = line
		}
		off = next
	}
	if state == inSeq {
		seqEnd = len(text)
	}
	if state < inSeq {
		return sp, false
	}

	// Cut the chunks' texts, and the skeleton with as many empty lines.
	lines := sp.chunks[len(sp.chunks)-1].end - sp.chunks[0].start + 1
	sp.skeleton = make([]byte, 0, seqStart+lines+len(text)-seqEnd)
	sp.skeleton = append(sp.skeleton, text[:seqStart]...)
	for range lines {
		sp.skeleton = append(sp.skeleton, '\n')
	}
	sp.skeleton = append(sp.skeleton, text[seqEnd:]...)
	for i := range sp.chunks {
		end := seqEnd
		if i+1 < len(sp.chunks) {
			end = sp.chunks[i+1].off
		}
		sp.chunks[i].text = text[sp.chunks[i].off:end]
	}
	return sp, true
}

// marker reports whether the line l is the document marker m.
func marker(l, m string) bool {
	return strings.HasPrefix(l, m) && (len(l) == len(m) || l[len(m)] == ' ')
}

// isSeqKey reports whether l is key and a colon, maybe with spaces and a
// comment after it.
func isSeqKey(l, key string) bool {
	rest, ok := strings.CutPrefix(l, key)
	if !ok || !strings.HasPrefix(rest, ":") {
		return false
	}
	rest = rest[1:]
	t := strings.TrimLeft(rest, " ")
	return t == "" || t[0] == '#' && len(t) < len(rest)
}

// isItem reports whether the line, without its indentation, starts an
// item of a block sequence.
func isItem(t string) bool {
	return t == "-" || strings.HasPrefix(t, "- ")
}

// plainTree reports whether no node under n has an anchor or is an alias
// (and so whether each part of the tree decodes the same alone).
func plainTree(n *yaml.Node) bool {
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return false
	}
	for _, c := range n.Content {
		if !plainTree(c) {
			return false
		}
	}
	return true
}

// recordsValue returns the value of the records key of the top-level
// mapping root (seqValue).
func recordsValue(root *yaml.Node, keyLine int) *yaml.Node {
	return seqValue(root, "records", keyLine)
}

// seqValue returns the value of key in the top-level mapping root when
// root is a block mapping (a flow mapping could not hold the block
// sequence) with that key at the start of line keyLine, and no merge key
// that could bring in another; or nil.
func seqValue(root *yaml.Node, key string, keyLine int) *yaml.Node {
	if root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 {
		return nil
	}
	var v *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		switch k.Value {
		case "<<":
			return nil
		case key:
			if v != nil || k.Line != keyLine || k.Column != 1 || k.Kind != yaml.ScalarNode {
				return nil
			}
			v = root.Content[i+1]
		}
	}
	return v
}

// cacheRecords builds the cache of c, just parsed from c.text whose tree
// is root, when the records decoded from the file are the items
// splitRecords finds in it: as many, each item inside its chunk, with
// neither anchors nor aliases anywhere in the file.
func cacheRecords(c *Config, root *yaml.Node) *recordCache {
	if len(c.Records) == 0 || len(c.recLines) != len(c.Records) {
		return nil
	}
	sp, ok := splitRecords(c.text, len(c.Records))
	if !ok || len(sp.chunks) != len(c.Records) {
		return nil
	}
	v := recordsValue(root, sp.keyLine)
	if v == nil || v.Kind != yaml.SequenceNode || len(v.Content) != len(sp.chunks) || !plainTree(root) {
		return nil
	}
	rc := &recordCache{items: make(map[string]*recordItem, len(sp.chunks))}
	for i, ch := range sp.chunks {
		rl := c.recLines[i]
		if l := v.Content[i].Line; l < ch.start || l > ch.end || rl.base != l {
			return nil
		}
		if rc.items[ch.text] != nil {
			continue
		}
		rc.items[ch.text] = &recordItem{rec: &c.Records[i], lines: rl.rel, off: rl.base - ch.start}
	}
	return rc
}

// decodeChunk decodes the text of one item alone. It reports false on
// any problem (left to Parse to report) and when the text is not exactly
// one mapping free of anchors and aliases.
func decodeChunk(text string) (*recordItem, bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, false
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode || len(seq.Content) != 1 || !plainTree(&doc) {
		return nil, false
	}
	item := seq.Content[0]
	if item.Kind != yaml.MappingNode {
		// Parse drops a null item from Records (keeping its key paths,
		// which then no longer match the records' indexes); anything else
		// but a mapping is an error.
		return nil, false
	}
	var probs diag.Problems
	it := &recordItem{rec: new(Record), lines: map[string]int{}, off: item.Line - 1}
	w := keyWalker{probs: &probs, lines: it.lines, base: item.Line, rec: 0}
	w.walk(item, "", recordType, false)
	if len(probs) > 0 {
		return nil, false
	}
	if err := item.Decode(it.rec); err != nil {
		return nil, false
	}
	return it, true
}

// reparse is Parse of data for LoadAgain, reusing the records of prev
// whose text is unchanged. It returns nil when it cannot, or finds any
// problem: Parse then decodes the file and reports what it finds.
func reparse(fsys fs.FS, file string, data []byte, prev *Config) *Config {
	if prev == nil || prev.cache == nil {
		return nil
	}
	text := string(data)
	sp, ok := splitRecords(text, len(prev.Records)+len(prev.Records)/16+16)
	if !ok {
		return nil
	}
	items := make([]*recordItem, len(sp.chunks))
	misses := 0
	for i, ch := range sp.chunks {
		if items[i] = prev.cache.items[ch.text]; items[i] == nil {
			misses++
		}
	}
	if misses > len(items)/2 {
		return nil // decoding most items one by one is no faster than Parse
	}

	root := parseSkeleton(sp.skeleton, "records", sp.keyLine)
	if root == nil {
		return nil
	}
	var probs diag.Problems
	c := &Config{File: file, FS: fsys, lines: map[string]int{}, text: text}
	w := keyWalker{probs: &probs, file: file, lines: c.lines, recs: &c.recLines, zones: &c.zoneLines, rec: -1}
	w.walk(root, "", reflect.TypeOf(c), true)
	if len(probs) > 0 || len(c.recLines) != 0 {
		return nil
	}
	shareRecLines(c.zoneLines)
	if err := root.Decode(c); err != nil || c.Records != nil {
		return nil
	}
	c.decodeValidity(root, &probs)

	c.Records = make([]Record, len(sp.chunks))
	c.recLines = make([]recLines, len(sp.chunks))
	cache := &recordCache{items: make(map[string]*recordItem, len(sp.chunks))}
	for i, ch := range sp.chunks {
		it := items[i]
		if it == nil {
			if it = cache.items[ch.text]; it == nil {
				if it, ok = decodeChunk(ch.text); !ok {
					return nil
				}
			}
		} else {
			c.reused++
		}
		c.Records[i] = *it.rec
		// The new cache points into this configuration's records, so
		// that it keeps no earlier configuration's alive.
		cache.items[ch.text] = &recordItem{rec: &c.Records[i], lines: it.lines, off: it.off}
		c.recLines[i] = recLines{base: ch.start + it.off, rel: it.lines}
	}

	c.applyDefaults()
	c.check(&probs)
	if len(probs) > 0 {
		return nil
	}
	c.cache = cache
	c.dropText()
	return c
}
