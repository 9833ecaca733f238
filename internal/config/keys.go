package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/steer-dns/steer/internal/diag"
	"go.yaml.in/yaml/v3"
)

// checkKeys walks the YAML tree n alongside the Go type of v, reporting every
// mapping key that has no field, and records the line of every key path in
// lines ("zones[0].origin" -> 12). It reports all unknown keys at once,
// where yaml's own strict mode stops at the first.
func checkKeys(n *yaml.Node, prefix string, v any, probs *diag.Problems, file string, lines map[string]int) {
	walkKeys(n, prefix, reflect.TypeOf(v), probs, file, lines)
}

func walkKeys(n *yaml.Node, prefix string, t reflect.Type, probs *diag.Problems, file string, lines map[string]int) {
	if n == nil || t == nil {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if prefix != "" {
		if _, ok := lines[prefix]; !ok {
			lines[prefix] = n.Line
		}
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
				walkKeys(val, prefix, t, probs, file, lines)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				where := "at the top level"
				if prefix != "" {
					where = "in " + prefix
				}
				probs.Add(file, k.Line, "unknown key %q %s (known keys: %s)", k.Value, where, knownKeys(fields))
				continue
			}
			p := k.Value
			if prefix != "" {
				p = prefix + "." + k.Value
			}
			lines[p] = k.Line
			walkKeys(val, p, ft, probs, file, lines)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			walkKeys(item, fmt.Sprintf("%s[%d]", prefix, i), t.Elem(), probs, file, lines)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			p := prefix + "." + k.Value
			lines[p] = k.Line
			walkKeys(val, p, t.Elem(), probs, file, lines)
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
	return out
}

func knownKeys(fields map[string]reflect.Type) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
