package simulate

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestScanLine: the fast decoder agrees with encoding/json on every line
// it accepts, and hands back the lines it cannot read.
func TestScanLine(t *testing.T) {
	cases := []struct {
		line string
		fast bool // scanLine reads it
	}{
		{`{"time":"2026-03-02T00:00:01.5Z","client":"192.0.2.1","ecs":"198.51.100.0/24","scope":20,"name":"shop.example.com.","type":"A","rcode":"NOERROR","rule":1,"pool":"us-east","answers":["192.0.2.30","192.0.2.31"],"duration_us":12.5,"transport":"udp"}`, true},
		{`{"time":"2026-03-02T00:00:01Z","client":"::1","name":"www.example.com.","type":"AAAA","rcode":"NXDOMAIN","duration_us":3,"transport":"tcp"}`, true},
		{` { "time" : "t" , "scope" : null , "ttl" : 60.5 , "answers" : [ ] , "x" : true } `, true},
		{`{}`, true},
		{`{"name":"a\"b.example."}`, false},                  // an escape
		{`{"name":"x","extra":{"nested":1}}`, false},         // a nested object
		{`{"name":"x","answers":[["a"]]}`, false},            // a nested array
		{`{"scope":"20"}`, false},                            // a string where a number belongs
		{`{"scope":2.5}`, false},                             // not an integer
		{`{"name":"x",}`, false},                             // bad syntax
		{`{"name":"x"} trailing`, false},                     // trailing text
		{`{"name":"x","n":01}`, false},                       // not a JSON number
		{`["not","an","object"]`, false},                     // not an object
		{`{"name":"x"`, false},                               // cut short
		{`{"time":"2026-03-02T00:00:01Z","scope":0}`, true},  // scope 0
		{`{"time":"2026-03-02T00:00:01Z","ttl":null}`, true}, // null
		{`{"name":"caf` + "\xc3\xa9" + `.example."}`, true},  // UTF-8 passes through
	}
	for _, c := range cases {
		var fast logLine
		ok := scanLine([]byte(c.line), &fast)
		if ok != c.fast {
			t.Errorf("scanLine(%s) = %t, want %t", c.line, ok, c.fast)
			continue
		}
		if !ok {
			continue
		}
		var slow logLine
		if err := json.Unmarshal([]byte(c.line), &slow); err != nil {
			t.Errorf("%s: scanLine read it, encoding/json says %v", c.line, err)
			continue
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s:\nscanLine      %+v\nencoding/json %+v", c.line, fast, slow)
		}
	}
}
