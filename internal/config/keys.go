package config

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/steer-dns/steer/internal/diag"
	"go.yaml.in/yaml/v3"
)

// recLines holds the key paths of one item of the top-level records (or
// zones) sequence: rel maps the path after "records[i]" ("", ".name",
// ".pools.x.address") to its line minus base, base being the item's line.
// Keeping them apart from the other paths lets a reload share a record's
// table with the configuration it reuses the record from, and items
// written alike share one table (shareRecLines): 100,000 zones in one
// map of paths cost about 180 bytes each, three paths a zone.
type recLines struct {
	base int
	rel  map[string]int
}

// keyWalker walks a YAML tree alongside a Go type, reporting every mapping
// key that has no field and recording the line of every key path. It
// reports all unknown keys at once, where yaml's own strict mode stops at
// the first.
//
// A walker of the whole file (rec < 0) records paths in lines, except
// those of the items of the top-level records and zones sequences, which
// go to recs and zones. A walker of one item (rec >= 0) records paths
// relative to the item in lines, lines being relative to base; its
// messages name seq[rec] (records when seq is "").
type keyWalker struct {
	probs *diag.Problems
	file  string
	lines map[string]int
	base  int
	recs  *[]recLines
	zones *[]recLines
	rec   int
	seq   string
}

// setIfAbsent and set record the line of path p.
func (w *keyWalker) setIfAbsent(p string, line int) {
	if _, ok := w.lines[p]; !ok {
		w.lines[p] = line - w.base
	}
}

func (w *keyWalker) set(p string, line int) { w.lines[p] = line - w.base }

// where names the path p (relative to the walker) in a message.
func (w *keyWalker) where(p string, root bool) string {
	switch {
	case w.rec >= 0:
		seq := w.seq
		if seq == "" {
			seq = "records"
		}
		return "in " + seq + "[" + strconv.Itoa(w.rec) + "]" + p
	case root:
		return "at the top level"
	}
	return "in " + p
}

// walk checks n against t at path prefix; root is true at the top of the
// file (whose path is empty and has no line of its own).
func (w *keyWalker) walk(n *yaml.Node, prefix string, t reflect.Type, root bool) {
	if n == nil || t == nil {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !root {
		w.setIfAbsent(prefix, n.Line)
	}
	// Types that decode themselves from any node shape are leaves.
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // merge key: check the merged mapping
				w.walk(val, prefix, t, root)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				ft, ok = fields[anyKey] // an inline map takes every other key
			}
			if !ok {
				w.probs.Add(w.file, k.Line, "unknown key %q %s (known keys: %s)", k.Value, w.where(prefix, root), knownKeys(fields))
				continue
			}
			p := k.Value
			if !root {
				p = prefix + "." + k.Value
			}
			w.set(p, k.Line)
			if root && w.rec < 0 && k.Value == "records" && ft == recordsType {
				w.items(val, w.recs, recordType, "")
				continue
			}
			if root && w.rec < 0 && w.zones != nil && k.Value == "zones" && ft == zonesType {
				w.items(val, w.zones, zoneType, "zones")
				continue
			}
			w.walk(val, p, ft, false)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			w.walk(item, prefix+"["+strconv.Itoa(i)+"]", t.Elem(), false)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := prefix + "." + k.Value
			w.set(p, k.Line)
			w.walk(val, p, t.Elem(), false)
		}
	}
}

var (
	recordsType = reflect.TypeFor[[]Record]()
	recordType  = reflect.TypeFor[Record]()
	zonesType   = reflect.TypeFor[[]Zone]()
	zoneType    = reflect.TypeFor[Zone]()
)

// items walks the value of the top-level records (or zones) key, each
// item, of type t, into its own table of recs; seq names the sequence in
// messages ("" for records). An item's table is made when its path is
// first recorded, with the item's line as base, as a single map of paths
// would keep the first line recorded for "records[i]".
func (w *keyWalker) items(n *yaml.Node, recs *[]recLines, t reflect.Type, seq string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.SequenceNode {
		return
	}
	for i, item := range n.Content {
		if i == len(*recs) {
			it := item
			for it.Kind == yaml.AliasNode && it.Alias != nil {
				it = it.Alias
			}
			*recs = append(*recs, recLines{base: it.Line, rel: map[string]int{}})
		}
		rl := (*recs)[i]
		sub := keyWalker{probs: w.probs, file: w.file, lines: rl.rel, base: rl.base, rec: i, seq: seq}
		sub.walk(item, "", t, false)
	}
}

// shareRecLines makes the records whose key paths sit at the same lines
// relative to their item share one table: records written alike (one
// line each, or the same layout) have equal tables, and a table per
// record cost about 600 bytes a name. The tables are read-only once
// walked.
func shareRecLines(recs []recLines) {
	seen := map[string]map[string]int{}
	var key []byte
	var paths []string
	for i := range recs {
		rel := recs[i].rel
		paths = paths[:0]
		for p := range rel {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		key = key[:0]
		for _, p := range paths {
			key = append(key, p...)
			key = append(key, 0)
			key = strconv.AppendInt(key, int64(rel[p]), 10)
			key = append(key, 0)
		}
		if s, ok := seen[string(key)]; ok {
			recs[i].rel = s
		} else {
			seen[string(key)] = rel
		}
	}
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := computeFields(t)
	fieldCache.Store(t, m)
	return m
}

// anyKey is the entry of yamlFields standing for the keys of an inline
// map (any key the struct's fields do not name), with the map's element
// type; the owner of the map checks the names.
const anyKey = "*"

// fieldCache holds yamlFields by type: a config of 10,000 records walks
// the same few struct types 10,000 times. The maps are never modified.
var fieldCache sync.Map

func computeFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Map {
			out[anyKey] = f.Type.Elem()
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	for k, v := range extraFields[t] {
		out[k] = v
	}
	return out
}

func knownKeys(fields map[string]reflect.Type) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != anyKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
