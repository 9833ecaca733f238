// Package loadfeed is the format of capacity feedback's load feed: the
// body of PUT /v1/load and the content of a load file (load.files), read
// by the node and by steer simulate alike, so that a file that feeds a
// node feeds a simulation unchanged.
package loadfeed

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Body is the body of PUT /v1/load and the content of a load file, in
// the shape of Akamai GTM's load objects: per pool its current load and
// when it was measured. A bare JSON array of items is accepted too.
type Body struct {
	Loads []Item `json:"loads"`
}

// Item is one pool's load.
type Item struct {
	Record string `json:"record"`
	Pool   string `json:"pool"`
	// Current is the load in the unit of the pool's capacity.
	Current *float64 `json:"current-load"`
	// Timestamp is when it was measured (RFC 3339; default: when it
	// arrived).
	Timestamp string `json:"timestamp,omitempty"`
}

// Parse reads a Body (or a bare array of items) strictly; errors name
// the source (a file, "body") and the item. It checks the shape only:
// whether the records and pools exist is the reader's to check.
func Parse(name string, data []byte) ([]Item, error) {
	var raw []json.RawMessage
	d := bytes.TrimSpace(data)
	if len(d) > 0 && d[0] == '[' {
		if err := json.Unmarshal(d, &raw); err != nil {
			return nil, fmt.Errorf("%s: not a JSON array of loads: %v", name, err)
		}
	} else {
		var body struct {
			Loads []json.RawMessage `json:"loads"`
		}
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			return nil, fmt.Errorf(`%s: not a JSON object {"loads": [...]}: %v`, name, err)
		}
		raw = body.Loads
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: no loads", name)
	}
	items := make([]Item, len(raw))
	for i, m := range raw {
		dec := json.NewDecoder(bytes.NewReader(m))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&items[i]); err != nil {
			return nil, fmt.Errorf("%s: loads[%d]: %v", name, i, err)
		}
	}
	return items, nil
}
