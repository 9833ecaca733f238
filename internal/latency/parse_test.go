package latency

import (
	"strings"
	"testing"
	"time"
)

func TestParseCSVGood(t *testing.T) {
	in := `# measurements from the probe fleet
key,site,rtt_ms,samples,measured_at

203.0.113.0/24, mumbai, 40.5, 12, 2026-01-02T03:04:05Z
  # indented comment
as64496,frankfurt,150,3,2026-01-02T03:04:05+05:30
in-mh,virginia,230,1,2026-01-02T03:04:05Z
IN,mumbai,50,1,2026-01-02T03:04:05Z
continent:as,mumbai,60,1,2026-01-02T03:04:05Z
2001:db8::1/32,mumbai,61,1,2026-01-02T03:04:05Z
`
	ms, err := ParseCSV("m.csv", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"203.0.113.0/24", "AS64496", "IN-MH", "IN", "continent:AS", "2001:db8::/32"}
	if len(ms) != len(want) {
		t.Fatalf("got %d measurements, want %d", len(ms), len(want))
	}
	for i, w := range want {
		if ms[i].Key != w {
			t.Errorf("[%d] key %q, want %q", i, ms[i].Key, w)
		}
	}
	if m := ms[0]; m.Site != "mumbai" || m.RTTms != 40.5 || m.Samples != 12 || !m.MeasuredAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("first = %+v", m)
	}
	// No header at all is fine too.
	ms, err = ParseCSV("n.csv", strings.NewReader("IN,mumbai,50,1,2026-01-02T03:04:05Z\n"))
	if err != nil || len(ms) != 1 {
		t.Fatalf("headerless: %v %v", ms, err)
	}
}

func TestParseCSVBad(t *testing.T) {
	good := "IN,mumbai,50,1,2026-01-02T03:04:05Z\n"
	cases := []struct{ line, want string }{
		{"IN,mumbai,50,1", "want 5 fields"},
		{"IN,mumbai,50,1,2026-01-02T03:04:05Z,x", "want 5 fields"},
		{"XYZ,mumbai,50,1,2026-01-02T03:04:05Z", "bad key"},
		{",mumbai,50,1,2026-01-02T03:04:05Z", "empty key"},
		{"10.0.0.0/33,mumbai,50,1,2026-01-02T03:04:05Z", "bad CIDR key"},
		{"continent:XX,mumbai,50,1,2026-01-02T03:04:05Z", "bad continent key"},
		{"AS99999999999,mumbai,50,1,2026-01-02T03:04:05Z", "bad ASN key"},
		{"IN,,50,1,2026-01-02T03:04:05Z", "empty site"},
		{"IN,mumbai,fast,1,2026-01-02T03:04:05Z", "bad rtt_ms"},
		{"IN,mumbai,-1,1,2026-01-02T03:04:05Z", "bad rtt_ms"},
		{"IN,mumbai,NaN,1,2026-01-02T03:04:05Z", "bad rtt_ms"},
		{"IN,mumbai,50,x,2026-01-02T03:04:05Z", "bad samples"},
		{"IN,mumbai,50,0,2026-01-02T03:04:05Z", "bad samples"},
		{"IN,mumbai,50,1,yesterday", "bad measured_at"},
		{"IN,mumbai,50,1,2026-01-02", "bad measured_at"},
	}
	for _, c := range cases {
		in := "# c\n" + good + c.line + "\n" + good
		ms, err := ParseCSV("lat.csv", strings.NewReader(in))
		if err == nil {
			t.Errorf("%q: no error", c.line)
			continue
		}
		if ms != nil {
			t.Errorf("%q: got %d measurements with an error (want all or nothing)", c.line, len(ms))
		}
		if !strings.HasPrefix(err.Error(), "lat.csv:3: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q, want lat.csv:3: ...%s", c.line, err, c.want)
		}
	}
}

func TestParseJSON(t *testing.T) {
	in := `[{"key":"203.0.113.0/24","site":"mumbai","rtt_ms":40,"samples":5,"measured_at":"2026-01-02T03:04:05Z"},
	        {"key":"continent:eu","site":"frankfurt","rtt_ms":10.5,"samples":1,"measured_at":"2026-01-02T03:04:05Z"}]`
	ms, err := ParseJSON("m.json", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[1].Key != "continent:EU" || ms[1].RTTms != 10.5 || ms[0].Samples != 5 {
		t.Fatalf("got %+v", ms)
	}
	ms, err = ParseJSON("e.json", strings.NewReader(`[]`))
	if err != nil || len(ms) != 0 {
		t.Fatalf("empty: %v %v", ms, err)
	}

	good := `{"key":"IN","site":"mumbai","rtt_ms":40,"samples":5,"measured_at":"2026-01-02T03:04:05Z"}`
	bad := []struct{ el, want string }{
		{`{"key":"IN","site":"mumbai","rtt_ms":40,"samples":5}`, "missing field"},
		{`{"key":"IN","site":"mumbai","rtt_ms":40,"samples":5,"measured_at":"2026-01-02T03:04:05Z","x":1}`, "unknown field"},
		{`{"key":"XYZ","site":"mumbai","rtt_ms":40,"samples":5,"measured_at":"2026-01-02T03:04:05Z"}`, "bad key"},
		{`{"key":"IN","site":"","rtt_ms":40,"samples":5,"measured_at":"2026-01-02T03:04:05Z"}`, "empty site"},
		{`{"key":"IN","site":"mumbai","rtt_ms":-4,"samples":5,"measured_at":"2026-01-02T03:04:05Z"}`, "bad rtt_ms"},
		{`{"key":"IN","site":"mumbai","rtt_ms":"40","samples":5,"measured_at":"2026-01-02T03:04:05Z"}`, "cannot unmarshal"},
		{`{"key":"IN","site":"mumbai","rtt_ms":40,"samples":0,"measured_at":"2026-01-02T03:04:05Z"}`, "bad samples"},
		{`{"key":"IN","site":"mumbai","rtt_ms":40,"samples":5,"measured_at":"soon"}`, "bad measured_at"},
	}
	for _, b := range bad {
		ms, err := ParseJSON("lat.json", strings.NewReader("["+good+","+b.el+","+good+"]"))
		if err == nil || ms != nil {
			t.Errorf("%s: got %v, %v; want error and no measurements", b.el, ms, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "lat.json: [1]: ") || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %q, want lat.json: [1]: ...%s", b.el, err, b.want)
		}
	}
	for _, doc := range []string{`{"key":"IN"}`, `[`, `[] []`} {
		if ms, err := ParseJSON("x.json", strings.NewReader(doc)); err == nil || ms != nil || !strings.HasPrefix(err.Error(), "x.json: ") {
			t.Errorf("%s: got %v, %v", doc, ms, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3/8":          "10.0.0.0/8",
		"::ffff:10.1.2.0/120": "10.1.2.0/24",
		"AS15169":             "AS15169",
		"as15169":             "AS15169",
		"AS":                  "AS", // American Samoa, a country
		"in-mh":               "IN-MH",
		"GB-ENG":              "GB-ENG",
		"continent:na":        "continent:NA",
		"CONTINENT:SA":        "continent:SA",
	} {
		k, err := ParseKey(in)
		if err != nil || k.String() != want {
			t.Errorf("ParseKey(%q) = %v, %v; want %s", in, k, err, want)
		}
	}
	if k, _ := ParseKey("AS"); k.Kind != KindCountry {
		t.Errorf("AS is %v, want country", k.Kind)
	}
	if k, _ := ParseKey("continent:AS"); k.Kind != KindContinent {
		t.Errorf("continent:AS is %v, want continent", k.Kind)
	}
	for _, in := range []string{"", "AS0", "A", "IND", "IN-", "IN-TOOLONG", "continent:", "continent:ZZ", "1.2.3.4", "fe80::/10%eth0"} {
		if _, err := ParseKey(in); err == nil {
			t.Errorf("ParseKey(%q) accepted", in)
		}
	}
}
