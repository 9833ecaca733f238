package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/config"
)

// variant is a value differing from a base value in one place, path.
type variant struct {
	path string
	v    reflect.Value
}

// variants returns a value of type t with every field, pointer, slice and
// map set (a new one on each call), and every value that differs from it
// in one leaf: another string or number, a nil or an empty slice, a
// missing or extra map entry, and so on. Recursive types go two levels
// deep. Record.Line, which BuildWith compares separately, is left out.
func variants(t reflect.Type, seen map[reflect.Type]int) (reflect.Value, []variant) {
	v := reflect.New(t).Elem()
	one := func(x any) reflect.Value { return reflect.ValueOf(x).Convert(t) }
	switch t.Kind() {
	case reflect.String:
		return one("s"), []variant{{"", one("t")}, {"", one("")}}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return one(1), []variant{{"", one(2)}, {"", one(0)}}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return one(uint(1)), []variant{{"", one(uint(2))}, {"", one(uint(0))}}
	case reflect.Float32, reflect.Float64:
		return one(1.5), []variant{{"", one(2.5)}, {"", one(0.0)}}
	case reflect.Bool:
		return one(true), []variant{{"", one(false)}}
	case reflect.Pointer:
		if seen[t] >= 2 {
			return v, nil
		}
		seen[t]++
		defer func() { seen[t]-- }()
		eb, em := variants(t.Elem(), seen)
		v = reflect.New(t.Elem())
		v.Elem().Set(eb)
		out := []variant{{"=nil", reflect.Zero(t)}}
		for _, m := range em {
			p := reflect.New(t.Elem())
			p.Elem().Set(m.v)
			out = append(out, variant{m.path, p})
		}
		return v, out
	case reflect.Slice:
		eb, em := variants(t.Elem(), seen)
		v = reflect.Append(reflect.MakeSlice(t, 0, 1), eb)
		eb2, _ := variants(t.Elem(), seen)
		out := []variant{
			{"=nil", reflect.Zero(t)},
			{"=[]", reflect.MakeSlice(t, 0, 0)},
			{"+[1]", reflect.Append(reflect.MakeSlice(t, 0, 2), eb, eb2)},
		}
		for _, m := range em {
			out = append(out, variant{"[0]" + m.path, reflect.Append(reflect.MakeSlice(t, 0, 1), m.v)})
		}
		return v, out
	case reflect.Map:
		eb, em := variants(t.Elem(), seen)
		k, _ := variants(t.Key(), seen)
		k2 := reflect.ValueOf("k2").Convert(t.Key())
		v = reflect.MakeMap(t)
		v.SetMapIndex(k, eb)
		out := []variant{{"=nil", reflect.Zero(t)}, {"={}", reflect.MakeMap(t)}}
		renamed := reflect.MakeMap(t)
		renamed.SetMapIndex(k2, eb)
		extra := reflect.MakeMap(t)
		extra.SetMapIndex(k, eb)
		extra.SetMapIndex(k2, eb)
		out = append(out, variant{"[renamed]", renamed}, variant{"[extra]", extra})
		for _, m := range em {
			mm := reflect.MakeMap(t)
			mm.SetMapIndex(k, m.v)
			out = append(out, variant{"[k]" + m.path, mm})
		}
		return v, out
	case reflect.Struct:
		var out []variant
		type field struct {
			i     int
			muts  []variant
			value reflect.Value
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || t == reflect.TypeOf(config.Record{}) && f.Name == "Line" {
				continue
			}
			fb, fm := variants(f.Type, seen)
			v.Field(i).Set(fb)
			fields = append(fields, field{i, fm, fb})
		}
		for _, f := range fields {
			for _, m := range f.muts {
				c := reflect.New(t).Elem()
				c.Set(v)
				c.Field(f.i).Set(m.v)
				out = append(out, variant{"." + t.Field(f.i).Name + m.path, c})
			}
		}
		return v, out
	}
	panic(fmt.Sprintf("variants: no case for %v", t))
}

// recordEqual and policyEqual compare every field of what they are given
// (a field added to config.Record, Pool, Rule, Action, Match... and not
// compared fails here): equal values are equal, and a value changed in
// any one place is not.
func TestRecordEqualComparesEveryField(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		equal func(a, b reflect.Value) bool
	}{
		{reflect.TypeOf(config.Record{}), func(a, b reflect.Value) bool {
			return recordEqual(a.Addr().Interface().(*config.Record), b.Addr().Interface().(*config.Record))
		}},
		{reflect.TypeOf(config.Policy{}), func(a, b reflect.Value) bool {
			return policyEqual(a.Addr().Interface().(*config.Policy), b.Addr().Interface().(*config.Policy))
		}},
	} {
		addr := func(v reflect.Value) reflect.Value {
			p := reflect.New(v.Type())
			p.Elem().Set(v)
			return p.Elem()
		}
		base, muts := variants(tc.typ, map[reflect.Type]int{})
		again, _ := variants(tc.typ, map[reflect.Type]int{})
		if !tc.equal(addr(base), addr(again)) {
			t.Fatalf("%v: two equal values are not equal", tc.typ)
		}
		if len(muts) < 50 {
			t.Fatalf("%v: only %d variants", tc.typ, len(muts))
		}
		byPath := map[string]reflect.Value{}
		for _, m := range muts {
			if tc.equal(addr(base), addr(m.v)) || tc.equal(addr(m.v), addr(base)) {
				t.Errorf("%v: a value differing at %s is taken as equal", tc.typ, m.path)
			}
			byPath[m.path] = m.v
		}
		// No list and an empty one differ too (split: [] is an error).
		for path, v := range byPath {
			if p, ok := strings.CutSuffix(path, "=nil"); ok {
				if empty, ok := byPath[p+"=[]"]; ok && tc.equal(addr(v), addr(empty)) {
					t.Errorf("%v: no list at %s is taken as equal to an empty one", tc.typ, p)
				}
			}
		}
	}
	// Line is left to BuildWith, which reads every line anew.
	a, _ := variants(reflect.TypeOf(config.Record{}), map[reflect.Type]int{})
	r1, r2 := a.Interface().(config.Record), a.Interface().(config.Record)
	r2.Line = 99
	if !recordEqual(&r1, &r2) {
		t.Fatal("records at other lines are not equal")
	}
}
