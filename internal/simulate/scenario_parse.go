package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/diag"
	"go.yaml.in/yaml/v3"
)

// Defaults of the keys a scenario leaves out.
const (
	DefaultBin        = time.Minute
	DefaultRuns       = 20
	DefaultSeed       = 1
	DefaultType       = "A"
	DefaultStart      = "2026-01-01T00:00:00Z"
	DefaultCount      = 1
	DefaultCaches     = 1
	DefaultECSV4      = 24
	DefaultECSV6      = 56
	DefaultGeoSubnets = 1000
	DefaultGeoZipf    = 1.0
	// DefaultCapacityInterval is a capacity prediction's feed interval.
	DefaultCapacityInterval = 10 * time.Second
	// shareTolerance is how far from 1 the shares of a group's sites may sum.
	shareTolerance = 1e-6
)

// LoadScenario reads and checks the scenario file at path. The error, when
// not nil, is diag.Problems (each "file:line: reason").
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, diag.Problems{{File: path, Msg: err.Error()}}
	}
	return ParseScenario(path, data)
}

// ParseScenario decodes data (the contents of file, YAML or JSON)
// strictly (unknown keys are errors), fills in the defaults and checks
// everything that needs no configuration. Every problem found is
// reported, each as "file:line: reason", in one diag.Problems.
func ParseScenario(file string, data []byte) (*Scenario, error) {
	var probs diag.Problems
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			probs.Add(file, 0, "the file is empty")
		} else {
			config.AddYAMLError(&probs, file, err)
		}
		return nil, probs.Err()
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		probs.Add(file, root.Line, "the top level must be a mapping of keys such as duration, record, clients and resolvers")
		return nil, probs.Err()
	}
	sc := &Scenario{}
	if err := root.Decode(sc); err != nil {
		config.AddYAMLError(&probs, file, err)
	}
	w := lineWalker{probs: &probs, file: file}
	w.walk(root, reflect.ValueOf(sc).Elem(), "")
	sc.File, sc.Line = file, root.Line
	if len(probs) > 0 {
		return nil, probs.Err()
	}
	keys := map[string]int{} // top-level key -> its line
	for i := 0; i+1 < len(root.Content); i += 2 {
		keys[root.Content[i].Value] = root.Content[i].Line
	}
	sc.keys = keys
	sc.applyDefaults()
	sc.check(&probs, keys)
	if err := probs.Err(); err != nil {
		return nil, err
	}
	return sc, nil
}

// lineWalker walks the decoded scenario beside its YAML nodes: it reports
// keys no field takes and sets each element's Line.
type lineWalker struct {
	probs *diag.Problems
	file  string
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (w *lineWalker) walk(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return // not decoded (the decoder reported why) or null
		}
		v = v.Elem()
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		return // decodes itself, keys and line included
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		if f := v.FieldByName("Line"); f.IsValid() && f.Kind() == reflect.Int {
			f.SetInt(int64(n.Line))
		}
		fields := yamlFields(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" { // merge key: check the merged mappings
				for val.Kind == yaml.AliasNode && val.Alias != nil {
					val = val.Alias
				}
				merged := []*yaml.Node{val}
				if val.Kind == yaml.SequenceNode {
					merged = val.Content
				}
				for _, mn := range merged {
					w.walk(mn, v, path)
				}
				if f := v.FieldByName("Line"); f.IsValid() && f.Kind() == reflect.Int {
					f.SetInt(int64(n.Line))
				}
				continue
			}
			fi, ok := fields[k.Value]
			if !ok {
				where := "at the top level"
				if path != "" {
					where = "in " + path
				}
				w.probs.Add(w.file, k.Line, "unknown key %q %s (known keys: %s)", k.Value, where, knownKeys(fields))
				continue
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			w.walk(val, v.Field(fi), p)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			if i < v.Len() {
				w.walk(item, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

// yamlFields maps a struct's yaml keys to field indices.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		out[name] = i
	}
	return out
}

func knownKeys(fields map[string]int) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// ParseDuration reads a duration as Go does ("90s", "1h30m", "500ms"),
// with days too: "1d", "2d12h", "1.5d".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimLeft(s, "+-")
	if i := strings.IndexByte(body, 'd'); i >= 0 {
		days, err := strconv.ParseFloat(body[:i], 64)
		if err != nil || body[:i] == "" || strings.ContainsAny(body[:i], "eE+-") {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		d := time.Duration(days * float64(24*time.Hour))
		if rest := body[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || strings.ContainsAny(rest[:1], "+-") {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			d += r
		}
		if neg {
			d = -d
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return d, nil
}

// String writes d as the shortest form ParseDuration reads back: "24h",
// "1h30m", "90s" → "1m30s", "0s"; days are written as hours.
func (d Duration) String() string { return fmtDuration(time.Duration(d)) }

func fmtDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	if d%time.Second != 0 {
		return sign + d.String()
	}
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	out := sign
	if h > 0 {
		out += strconv.FormatInt(int64(h), 10) + "h"
	}
	if m > 0 {
		out += strconv.FormatInt(int64(m), 10) + "m"
	}
	if s > 0 {
		out += strconv.FormatInt(int64(s), 10) + "s"
	}
	return out
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	// A *yaml.TypeError lets the decoder go on and report every problem.
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a duration must be a string such as 90s, 24h or 1d", n.Line)}}
	}
	if _, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Value != "0" {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: duration %s has no unit (write %ss, or 1m, 2h, 1d)", n.Line, n.Value, n.Value)}}
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q (use Go syntax such as 90s, 5m, 2h, or days: 1d)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler: the string form.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON implements json.Marshaler: the string form ("24h").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler: a string as in YAML, or a
// number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("a duration must be a string such as \"90s\" or a number of seconds, not %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler: false, true (the defaults:
// /24, /56, scope honoured) or a mapping of enabled, v4, v6 and
// honors_scope.
func (e *ECSSpec) UnmarshalYAML(n *yaml.Node) error {
	*e = ECSSpec{Line: n.Line}
	bad := func(format string, args ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf(format, args...)}}
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if err := n.Decode(&e.Enabled); err != nil {
			return bad("line %d: ecs must be false, true or a mapping of v4, v6 and honors_scope, not %q", n.Line, n.Value)
		}
		return nil
	case yaml.MappingNode:
	default:
		return bad("line %d: ecs must be false, true or a mapping of v4, v6 and honors_scope", n.Line)
	}
	e.Enabled = true
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "enabled":
			err = v.Decode(&e.Enabled)
		case "v4":
			err = v.Decode(&e.V4)
		case "v6":
			err = v.Decode(&e.V6)
		case "honors_scope":
			var b bool
			err = v.Decode(&b)
			e.HonorsScope = &b
		default:
			errs = append(errs, fmt.Sprintf("line %d: unknown key %q in ecs (known keys: enabled, honors_scope, v4, v6)", k.Line, k.Value))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("line %d: ecs.%s: %q is not a %s", v.Line, k.Value, v.Value, map[bool]string{true: "boolean", false: "number"}[k.Value == "enabled" || k.Value == "honors_scope"]))
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// MarshalYAML implements yaml.Marshaler: false, or the mapping.
func (e ECSSpec) MarshalYAML() (any, error) {
	if !e.Enabled {
		return false, nil
	}
	m := map[string]any{}
	if e.V4 != 0 {
		m["v4"] = e.V4
	}
	if e.V6 != 0 {
		m["v6"] = e.V6
	}
	if e.HonorsScope != nil {
		m["honors_scope"] = *e.HonorsScope
	}
	if len(m) == 0 {
		return true, nil
	}
	return m, nil
}

// UnmarshalJSON implements json.Unmarshaler: false, true, or an object
// (enabled unless it says enabled: false).
func (e *ECSSpec) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*e = ECSSpec{Enabled: on}
		return nil
	}
	type plain ECSSpec
	p := plain{Enabled: true}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("ecs must be false, true or an object of v4, v6 and honors_scope: %v", err)
	}
	*e = ECSSpec(p)
	return nil
}

func (sc *Scenario) applyDefaults() {
	if sc.Bin == 0 {
		sc.Bin = Duration(DefaultBin)
	}
	if sc.Runs == 0 {
		sc.Runs = DefaultRuns
	}
	if sc.Seed == nil {
		s := uint64(DefaultSeed)
		sc.Seed = &s
	}
	if sc.Type == "" {
		sc.Type = DefaultType
	}
	sc.Type = strings.ToUpper(sc.Type)
	if sc.Start == "" {
		sc.Start = DefaultStart
	}
	if c := sc.Capacity; c != nil {
		if c.Interval == 0 {
			c.Interval = Duration(DefaultCapacityInterval)
		}
		if c.Model == "" {
			c.Model = "fixed"
		}
	}
	for i := range sc.Clients {
		if g := sc.Clients[i].FromGeoDB; g != nil {
			if g.Subnets == 0 {
				g.Subnets = sc.Clients[i].Subnets
			}
			if g.Subnets == 0 {
				g.Subnets = DefaultGeoSubnets
			}
			if g.Zipf == nil {
				z := DefaultGeoZipf
				if sc.Clients[i].Zipf != 0 {
					z = sc.Clients[i].Zipf
				}
				g.Zipf = &z
			}
		}
	}
	for i := range sc.Resolvers {
		s := &sc.Resolvers[i]
		if s.Count == 0 {
			s.Count = DefaultCount
		}
		if s.Caches == 0 {
			s.Caches = DefaultCaches
		}
		if e := s.ECS; e != nil && e.Enabled {
			if e.V4 == 0 {
				e.V4 = DefaultECSV4
			}
			if e.V6 == 0 {
				e.V6 = DefaultECSV6
			}
			if e.HonorsScope == nil {
				t := true
				e.HonorsScope = &t
			}
		}
	}
}

// check reports what is wrong with sc on its own (without a
// configuration). keys are the top-level keys the file has, with their
// lines.
func (sc *Scenario) check(probs *diag.Problems, keys map[string]int) {
	present := func(k string) bool { _, ok := keys[k]; return ok }
	at := func(k string) int {
		if l := keys[k]; l > 0 {
			return l
		}
		return sc.Line
	}
	f := sc.File
	add := func(line int, format string, args ...any) {
		if line == 0 {
			line = sc.Line
		}
		probs.Add(f, line, format, args...)
	}
	dur, bin := time.Duration(sc.Duration), time.Duration(sc.Bin)
	for _, k := range []string{"duration", "record", "clients", "resolvers"} {
		if !present(k) {
			add(sc.Line, "%s is missing", k)
		}
	}
	switch {
	case !present("duration"):
	case dur <= 0:
		add(at("duration"), "duration %s must be positive", fmtDuration(dur))
	case bin <= 0:
		add(at("bin"), "bin %s must be positive", fmtDuration(bin))
	case bin > dur:
		add(at("bin"), "bin %s is longer than the duration %s", fmtDuration(bin), fmtDuration(dur))
	case dur%bin != 0:
		add(at("bin"), "bin %s does not divide the duration %s (the duration must be a whole number of bins)", fmtDuration(bin), fmtDuration(dur))
	}
	if sc.Runs < 0 {
		add(at("runs"), "runs %d is negative", sc.Runs)
	}
	if present("record") && strings.TrimSpace(sc.Record) == "" {
		add(at("record"), "record is empty")
	}
	if sc.Type != "A" && sc.Type != "AAAA" {
		add(at("type"), "type %q is not A or AAAA", sc.Type)
	}
	if sc.TTLOverride != nil && *sc.TTLOverride <= 0 {
		add(at("ttl_override"), "ttl_override %s must be positive", sc.TTLOverride)
	}
	if _, err := time.Parse(time.RFC3339, sc.Start); err != nil {
		add(at("start"), "start %q is not an RFC 3339 time such as %s", sc.Start, DefaultStart)
	}
	if present("clients") && len(sc.Clients) == 0 {
		add(at("clients"), "clients is empty: give at least one client group")
	}
	if present("resolvers") && len(sc.Resolvers) == 0 {
		add(at("resolvers"), "resolvers is empty: give at least one resolver site")
	}

	groups := map[string]int{}
	for i := range sc.Clients {
		g := &sc.Clients[i]
		switch prev, dup := groups[g.Name]; {
		case g.Name == "":
			add(g.Line, "client group %d has no name", i+1)
		case dup:
			add(g.Line, "client group %s is already defined at line %d", g.Name, sc.Clients[prev].Line)
		default:
			groups[g.Name] = i
		}
		checkGroup(g, add)
	}
	sites := map[string]int{}
	for i := range sc.Resolvers {
		s := &sc.Resolvers[i]
		switch prev, dup := sites[s.Name]; {
		case s.Name == "":
			add(s.Line, "resolver site %d has no name", i+1)
		case dup:
			add(s.Line, "resolver site %s is already defined at line %d", s.Name, sc.Resolvers[prev].Line)
		default:
			sites[s.Name] = i
		}
		checkSite(s, add)
		for _, g := range s.Groups {
			if _, ok := groups[g]; !ok {
				add(s.Line, "resolver site %s: groups names %s, which is not a client group (groups: %s)", s.Name, g, groupNames(sc))
			}
		}
		for _, g := range sortedKeys(s.Shares) {
			if _, ok := groups[g]; !ok {
				add(s.Line, "resolver site %s: shares names %s, which is not a client group (groups: %s)", s.Name, g, groupNames(sc))
			} else if len(s.Groups) > 0 && !contains(s.Groups, g) {
				add(s.Line, "resolver site %s: shares names %s, which its groups leave out", s.Name, g)
			}
		}
	}
	if sc.TTLViolators != nil {
		checkViolators(sc.TTLViolators, "ttl_violators", add)
	}
	// The shares of the sites serving each group sum to 1.
	served := siteShares(sc)
	for gi := range sc.Clients {
		g := &sc.Clients[gi]
		sum, n := 0.0, 0
		var parts []string
		unset := 0
		for si := range sc.Resolvers {
			sh, ok := served[si][gi]
			if !ok {
				continue
			}
			n++
			if math.IsNaN(sh) {
				unset++
				parts = append(parts, sc.Resolvers[si].Name+" (no share)")
				continue
			}
			sum += sh
			parts = append(parts, fmt.Sprintf("%s %.6g", sc.Resolvers[si].Name, sh))
		}
		switch {
		case n == 0:
			add(g.Line, "client group %s: no resolver site serves it", g.Name)
		case unset == 1:
			add(g.Line, "client group %s: the shares of the sites serving it sum to %.6g, more than 1, before the one without a share (%s)", g.Name, sum, strings.Join(parts, ", "))
		case unset > 1:
			add(g.Line, "client group %s: several of the sites serving it have no share (one may leave it out and carry the rest): %s", g.Name, strings.Join(parts, ", "))
		case math.Abs(sum-1) > shareTolerance:
			add(g.Line, "client group %s: the shares of the sites serving it sum to %.6g, not 1 (%s)", g.Name, sum, strings.Join(parts, ", "))
		}
	}
	for i := range sc.Events {
		checkEvent(&sc.Events[i], dur, present("duration") && dur > 0, add)
	}
	sc.checkCapacity(add, at("capacity"))
}

func checkGroup(g *ClientGroup, add func(int, string, ...any)) {
	name := g.Name
	switch {
	case len(g.Prefixes) == 0 && g.FromGeoDB == nil:
		add(g.Line, "client group %s has neither prefixes nor from_geodb", name)
	case len(g.Prefixes) > 0 && g.FromGeoDB != nil:
		add(g.Line, "client group %s has both prefixes and from_geodb: give one", name)
	}
	for _, p := range g.Prefixes {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			add(g.Line, "client group %s: %q is not a prefix such as 198.51.100.0/22 or 2001:db8::/48", name, p)
		}
	}
	if g.Rate <= 0 || math.IsNaN(g.Rate) || math.IsInf(g.Rate, 0) {
		add(g.Line, "client group %s: rate %g must be positive (user queries per second)", name, g.Rate)
	}
	if g.Subnets < 0 {
		add(g.Line, "client group %s: subnets %d is negative", name, g.Subnets)
	}
	if g.Zipf < 0 {
		add(g.Line, "client group %s: zipf %g is negative", name, g.Zipf)
	}
	if fg := g.FromGeoDB; fg != nil {
		if len(fg.Countries) == 0 {
			add(fg.Line, "client group %s: from_geodb lists no countries", name)
		}
		for _, c := range fg.Countries {
			if len(c) != 2 || strings.ToUpper(c) != c {
				add(fg.Line, "client group %s: from_geodb country %q is not an ISO 3166-1 alpha-2 code such as US", name, c)
			}
		}
		if fg.Subnets < 0 {
			add(fg.Line, "client group %s: from_geodb subnets %d is negative", name, fg.Subnets)
		}
		if fg.Zipf != nil && *fg.Zipf < 0 {
			add(fg.Line, "client group %s: from_geodb zipf %g is negative", name, *fg.Zipf)
		}
	}
	if d := g.Diurnal; d != nil {
		if d.Trough < 0 || d.Trough > 1 {
			add(d.Line, "client group %s: diurnal trough %g is not between 0 and 1", name, d.Trough)
		}
		if _, err := parseTimeOfDay(d.Peak); err != nil {
			add(d.Line, "client group %s: diurnal peak %q is not a time of day such as 18:00", name, d.Peak)
		}
	}
}

// keyLine is the line of a top-level key, or the scenario's first line.
func (sc *Scenario) keyLine(key string) int {
	if l := sc.keys[key]; l > 0 {
		return l
	}
	return sc.Line
}

// parseTimeOfDay reads "HH:MM" (or "HH:MM:SS") as a duration since midnight.
func parseTimeOfDay(s string) (time.Duration, error) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second, nil
		}
	}
	return 0, fmt.Errorf("invalid time of day %q", s)
}

func checkSite(s *ResolverSite, add func(int, string, ...any)) {
	name := s.Name
	if s.Share != nil && (*s.Share < 0 || math.IsNaN(*s.Share)) {
		add(s.Line, "resolver site %s: share %g is negative", name, *s.Share)
	}
	for _, g := range sortedKeys(s.Shares) {
		if v := s.Shares[g]; v < 0 || math.IsNaN(v) {
			add(s.Line, "resolver site %s: share %g for %s is negative", name, v, g)
		}
	}
	if s.Count < 0 {
		add(s.Line, "resolver site %s: count %d is negative", name, s.Count)
	}
	if s.Caches < 0 {
		add(s.Line, "resolver site %s: caches %d is negative", name, s.Caches)
	}
	if s.Address != "" {
		if _, err := siteAddresses(s.Address, max(s.Count, 1)); err != nil {
			add(s.Line, "resolver site %s: %v", name, err)
		}
	}
	if e := s.ECS; e != nil && e.Enabled {
		if e.V4 < 1 || e.V4 > 32 {
			add(e.Line, "resolver site %s: ecs v4 source length %d is not between 1 and 32", name, e.V4)
		}
		if e.V6 < 1 || e.V6 > 128 {
			add(e.Line, "resolver site %s: ecs v6 source length %d is not between 1 and 128", name, e.V6)
		}
	}
	if c := s.TTL; c != nil {
		if c.Min < 0 || c.Max < 0 {
			add(c.Line, "resolver site %s: ttl min %s and max %s must not be negative", name, c.Min, c.Max)
		}
		if c.Max > 0 && c.Min > c.Max {
			add(c.Line, "resolver site %s: ttl min %s is more than max %s", name, c.Min, c.Max)
		}
	}
	if s.TTLViolators != nil {
		checkViolators(s.TTLViolators, "resolver site "+name+": ttl_violators", add)
	}
}

func checkViolators(v *Violators, what string, add func(int, string, ...any)) {
	if v.Fraction < 0 || v.Fraction > 1 || math.IsNaN(v.Fraction) {
		add(v.Line, "%s: fraction %g is not between 0 and 1", what, v.Fraction)
	}
	if v.ExtendTo < 0 {
		add(v.Line, "%s: extend_to %s is negative", what, v.ExtendTo)
	}
	if v.Fraction > 0 && v.ExtendTo == 0 {
		add(v.Line, "%s: extend_to is missing (how long a violator keeps an answer, such as 3600s)", what)
	}
}

func checkEvent(e *Event, dur time.Duration, hasDur bool, add func(int, string, ...any)) {
	at := time.Duration(e.At)
	switch {
	case at < 0:
		add(e.Line, "event at %s is before the start", e.At)
	case hasDur && at >= dur:
		add(e.Line, "event at %s is after the end (duration %s)", e.At, fmtDuration(dur))
	}
	acts := e.actions()
	switch len(acts) {
	case 0:
		add(e.Line, "event at %s has no action (set_weights, drain, undrain, fail, recover, config or load)", e.At)
	case 1:
	default:
		add(e.Line, "event at %s has %d actions (%s): give one per event (several events may share a time)", e.At, len(acts), strings.Join(acts, ", "))
	}
	if e.SetWeights != nil && len(e.SetWeights) == 0 {
		add(e.Line, "event at %s: set_weights names no pool (pool: weight, ...)", e.At)
	}
	for _, p := range sortedKeys(e.SetWeights) {
		if w := e.SetWeights[p]; w < 0 {
			add(e.Line, "event at %s: weight %d for %s is negative", e.At, w, p)
		}
	}
	if e.Load != nil && len(e.Load) == 0 {
		add(e.Line, "event at %s: load names no pool (pool: load, ...)", e.At)
	}
	for _, p := range sortedKeys(e.Load) {
		if v := e.Load[p]; v != nil && !validLoad(*v) {
			add(e.Line, "event at %s: load %v for %s is not a number ≥ 0", e.At, *v, p)
		}
	}
}

// validLoad reports whether v can be a pool's load (as PUT /v1/load
// takes it).
func validLoad(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// checkCapacity checks the capacity section on its own; events with a
// load need it.
func (sc *Scenario) checkCapacity(add func(int, string, ...any), line int) {
	c := sc.Capacity
	if c == nil {
		for _, e := range sc.Events {
			if e.Load != nil {
				add(e.Line, "event at %s: load needs a capacity section (capacity: { interval: 10s, load: {...} })", e.At)
			}
		}
		return
	}
	if c.Line == 0 {
		c.Line = line
	}
	if c.Interval < 0 {
		add(c.Line, "capacity: interval %s must be positive", c.Interval)
	}
	if c.Intervals < 0 {
		add(c.Line, "capacity: intervals %d is negative", c.Intervals)
	}
	if c.Model != "fixed" && c.Model != "proportional" {
		add(c.Line, "capacity: model %q is not fixed or proportional", c.Model)
	}
	for _, p := range sortedKeys(c.Load) {
		if v := c.Load[p]; !validLoad(v) {
			add(c.Line, "capacity: load %v for %s is not a number ≥ 0", v, p)
		}
	}
	if len(c.Load) == 0 && c.LoadFile == "" && !slices.ContainsFunc(sc.Events, func(e Event) bool { return e.Load != nil }) {
		add(c.Line, "capacity: no load: give load (pool: load), load_file, or events with load")
	}
}

// actions names the actions an event sets.
func (e *Event) actions() []string {
	var out []string
	if e.SetWeights != nil {
		out = append(out, "set_weights")
	}
	if e.Load != nil {
		out = append(out, "load")
	}
	for _, a := range []struct{ name, v string }{{"drain", e.Drain}, {"undrain", e.Undrain}, {"fail", e.Fail}, {"recover", e.Recover}, {"config", e.Config}} {
		if a.v != "" {
			out = append(out, a.name)
		}
	}
	return out
}

// siteShares returns, per site, the share it carries of each group it
// serves (by group index). A site that sets no share carries what the
// group's other sites leave, when it is the only one of them without a
// share; otherwise its share is NaN (reported by check). A site serves its groups when it names them,
// else the groups its shares name when it has no share, else every
// group.
func siteShares(sc *Scenario) []map[int]float64 {
	idx := map[string]int{}
	for i, g := range sc.Clients {
		if _, ok := idx[g.Name]; !ok {
			idx[g.Name] = i
		}
	}
	out := make([]map[int]float64, len(sc.Resolvers))
	for si := range sc.Resolvers {
		s := &sc.Resolvers[si]
		m := map[int]float64{}
		var names []string
		switch {
		case len(s.Groups) > 0:
			names = s.Groups
		case s.Share == nil && len(s.Shares) > 0:
			names = sortedKeys(s.Shares)
		default:
			for _, g := range sc.Clients {
				names = append(names, g.Name)
			}
		}
		for _, n := range names {
			gi, ok := idx[n]
			if !ok {
				continue
			}
			sh := math.NaN()
			if v, ok := s.Shares[n]; ok {
				sh = v
			} else if s.Share != nil {
				sh = *s.Share
			}
			m[gi] = sh
		}
		out[si] = m
	}
	// A group's one site without a share carries what the others leave.
	for gi := range sc.Clients {
		unset, sum := -1, 0.0
		for si, m := range out {
			sh, ok := m[gi]
			switch {
			case !ok:
			case math.IsNaN(sh) && unset == -1:
				unset = si
			case math.IsNaN(sh):
				unset = -2 // several: reported
			default:
				sum += sh
			}
		}
		if unset >= 0 && sum <= 1+shareTolerance {
			out[unset][gi] = max(1-sum, 0)
		}
	}
	return out
}

// siteAddresses returns count consecutive addresses from spec: an address
// (the first) or a prefix (from its first host on).
func siteAddresses(spec string, count int) ([]netip.Addr, error) {
	spec = strings.TrimSpace(spec)
	var first netip.Addr
	room := uint64(math.MaxUint64)
	if strings.Contains(spec, "/") {
		p, err := netip.ParsePrefix(spec)
		if err != nil {
			return nil, fmt.Errorf("address %q is not an address or a prefix", spec)
		}
		p = p.Masked()
		first = p.Addr()
		if host := p.Addr().BitLen() - p.Bits(); host < 64 {
			room = uint64(1) << host
		}
		if room > 2 {
			first, room = first.Next(), room-1 // skip the network's own address
		}
		if uint64(count) > room {
			return nil, fmt.Errorf("address prefix %s holds fewer than the %d resolvers of the site", p, count)
		}
	} else {
		a, err := netip.ParseAddr(spec)
		if err != nil {
			return nil, fmt.Errorf("address %q is not an address or a prefix", spec)
		}
		first = a.Unmap()
	}
	out := make([]netip.Addr, 0, count)
	for a := first; len(out) < count; a = a.Next() {
		if !a.IsValid() {
			return nil, fmt.Errorf("address %s: too few addresses after it for the %d resolvers of the site", spec, count)
		}
		out = append(out, a)
	}
	return out, nil
}

func groupNames(sc *Scenario) string {
	var names []string
	for _, g := range sc.Clients {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
