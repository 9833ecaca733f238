package latency

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// csvHeader is the optional first line of a CSV file.
const csvHeader = "key,site,rtt_ms,samples,measured_at"

// ParseCSV reads measurements as lines "key,site,rtt_ms,samples,measured_at"
// (measured_at in RFC 3339). Blank lines and lines starting with '#' are
// skipped; the first non-comment line may be the header above. It is all or
// nothing: on any bad line it returns no measurements and an error
// "name:line: reason". Each measurement's Origin records name and line.
func ParseCSV(name string, r io.Reader) ([]Measurement, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var out []Measurement
	var p parser
	line, seen := 0, false
	var fields [5]string
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		first := !seen
		seen = true
		n, rest := 0, text
		for {
			f, after, more := strings.Cut(rest, ",")
			if n < len(fields) {
				fields[n] = strings.TrimSpace(f)
			}
			n++
			if !more {
				break
			}
			rest = after
		}
		if first && n == 5 && strings.EqualFold(strings.Join(fields[:], ","), csvHeader) {
			continue
		}
		if n != 5 {
			return nil, fmt.Errorf("%s:%d: want 5 fields (%s), got %d", name, line, csvHeader, n)
		}
		m := Measurement{Key: fields[0], Site: fields[1], Origin: Origin{Name: name, Pos: line}}
		rtt, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad rtt_ms %q", name, line, fields[2])
		}
		m.RTTms = rtt
		samples, err := strconv.Atoi(fields[3])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad samples %q", name, line, fields[3])
		}
		m.Samples = samples
		if m.MeasuredAt, err = p.time(fields[4]); err != nil {
			return nil, fmt.Errorf("%s:%d: bad measured_at %q (want RFC 3339)", name, line, fields[4])
		}
		if err := p.finish(&m); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	return out, nil
}

// parser holds what ParseCSV and ParseJSON reuse across entries: batches
// usually share one timestamp and a handful of sites.
type parser struct {
	lastTime string
	last     time.Time
	sites    map[string]string
}

// time parses an RFC 3339 time, remembering the last one.
func (p *parser) time(s string) (time.Time, error) {
	if s == p.lastTime && s != "" {
		return p.last, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	p.lastTime, p.last = s, t
	return t, nil
}

// finish validates m (see Measurement.Validate), puts its key in
// canonical form, and shares one copy of each site name.
func (p *parser) finish(m *Measurement) error {
	k, err := ParseKey(m.Key)
	if err != nil {
		return err
	}
	m.Key = k.String()
	if err := m.validateRest(); err != nil {
		return err
	}
	if p.sites == nil {
		p.sites = map[string]string{}
	}
	if s, ok := p.sites[m.Site]; ok {
		m.Site = s
	} else {
		m.Site = strings.Clone(m.Site)
		p.sites[m.Site] = m.Site
	}
	return nil
}

// jsonMeasurement is the JSON form of a Measurement.
type jsonMeasurement struct {
	Key        *string  `json:"key"`
	Site       *string  `json:"site"`
	RTTms      *float64 `json:"rtt_ms"`
	Samples    *int     `json:"samples"`
	MeasuredAt *string  `json:"measured_at"`
}

// ParseJSON reads measurements as a JSON array of objects
// {"key","site","rtt_ms","samples","measured_at"} (every field required,
// measured_at in RFC 3339, unknown fields rejected). It is all or nothing:
// on any bad element it returns no measurements and an error naming name
// and the element index ("name: [3]: reason"). Each measurement's Origin
// records name and index.
func ParseJSON(name string, r io.Reader) ([]Measurement, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	// Decode the whole array at once; only when that fails, go element
	// by element to say which one is wrong.
	var all []jsonMeasurement
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&all); err != nil || dec.More() {
		return nil, jsonError(name, data)
	}
	out := make([]Measurement, 0, len(all))
	var p parser
	for i := range all {
		j := &all[i]
		if j.Key == nil || j.Site == nil || j.RTTms == nil || j.Samples == nil || j.MeasuredAt == nil {
			return nil, fmt.Errorf("%s: [%d]: %v", name, i, errors.New("missing field (want key, site, rtt_ms, samples, measured_at)"))
		}
		t, err := p.time(*j.MeasuredAt)
		if err != nil {
			return nil, fmt.Errorf("%s: [%d]: bad measured_at %q (want RFC 3339)", name, i, *j.MeasuredAt)
		}
		m := Measurement{Key: *j.Key, Site: *j.Site, RTTms: *j.RTTms, Samples: *j.Samples, MeasuredAt: t,
			Origin: Origin{Name: name, JSON: true, Pos: i}}
		if err := p.finish(&m); err != nil {
			return nil, fmt.Errorf("%s: [%d]: %v", name, i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// jsonError finds what is wrong with data, which does not decode as an
// array of measurements, naming the element where it can.
func jsonError(name string, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: trailing data after the array", name)
	}
	for i, el := range raw {
		var j jsonMeasurement
		d := json.NewDecoder(bytes.NewReader(el))
		d.DisallowUnknownFields()
		if err := d.Decode(&j); err != nil {
			return fmt.Errorf("%s: [%d]: %v", name, i, err)
		}
	}
	return fmt.Errorf("%s: not an array of measurements", name)
}
