package latency

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	checkNow   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	checkSites = map[string]bool{"iad": true, "bom": true, "fra": true, "off": false}
)

// csvLine is a CSV line for key and site measured at.
func csvLine(key, site string, at time.Time) string {
	return fmt.Sprintf("%s,%s,50,1,%s\n", key, site, at.Format(time.RFC3339))
}

func TestCheckValid(t *testing.T) {
	in := "# header next\n" + csvHeader + "\n" +
		csvLine("203.0.113.0/24", "bom", checkNow) +
		csvLine("2001:db8::/32", "fra", checkNow) +
		csvLine("AS13335", "iad", checkNow) +
		csvLine("in-as", "bom", checkNow) +
		csvLine("IN", "bom", checkNow) +
		csvLine("gb", "fra", checkNow) +
		csvLine("XK", "fra", checkNow) + // Kosovo: user-assigned, but geo knows it
		csvLine("EU", "fra", checkNow) + // MaxMind pseudo-code that geo knows
		csvLine("AS", "iad", checkNow) + // American Samoa
		csvLine("continent:oc", "iad", checkNow) +
		csvLine("US", "iad", time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)) + // stale is fine
		csvLine("US", "iad", checkNow.Add(30*time.Second)) + // clock skew
		csvLine("US", "iad", checkNow.Add(MaxClockSkew)) // the limit itself
	ms, err := ParseCSV("lat.csv", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(ms, checkSites, checkNow); err != nil {
		t.Errorf("valid batch rejected: %v", err)
	}
	if err := Check(nil, nil, checkNow); err != nil {
		t.Errorf("empty batch rejected: %v", err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = Check(ms, checkSites, checkNow) }); n != 0 {
		t.Errorf("Check of a valid batch allocates %v times, want 0", n)
	}
}

func TestCheckRejects(t *testing.T) {
	cases := []struct {
		name      string
		key, site string
		at        time.Time
		want      string
	}{
		{"unknown site", "IN", "sin", checkNow, `site "sin" is not a site of any latency-steered record (known: bom, fra, iad)`},
		{"site case", "IN", "BOM", checkNow, `site "BOM" is not a site`},
		{"site mapped false", "IN", "off", checkNow, `site "off" is not a site`},
		{"country XX", "XX", "bom", checkNow, `country "XX" is not an ISO 3166-1 alpha-2 country code`},
		{"country zz", "zz", "bom", checkNow, `country "ZZ" is not an ISO 3166-1`},
		{"country AA", "AA", "bom", checkNow, `country "AA" is not an ISO 3166-1`},
		{"continent as country", "OC", "bom", checkNow, `country "OC" is not an ISO 3166-1 alpha-2 country code; for the continent write continent:OC`},
		{"subdivision", "XX-AB", "bom", checkNow, `subdivision "XX-AB": "XX" is not an ISO 3166-1 alpha-2 country code`},
		{"future 2030", "IN", "bom", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), `measured_at 2030-01-01T00:00:00Z is 1459 days in the future (at most 1m0s of clock skew is allowed)`},
		{"future 2m", "IN", "bom", checkNow.Add(2 * time.Minute), `measured_at 2026-01-02T03:06:05Z is 2m0s in the future`},
		{"future 61s", "IN", "bom", checkNow.Add(61 * time.Second), `measured_at 2026-01-02T03:05:06Z is 1m1s in the future`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := csvLine("IN", "bom", checkNow)
			in := "# comment\n" + good + good + csvLine(c.key, c.site, c.at) + good
			ms, err := ParseCSV("lat.csv", strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			err = Check(ms, checkSites, checkNow)
			if err == nil {
				t.Fatal("accepted")
			}
			if want := "lat.csv:4: " + c.want; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q\nwant prefix %q", err, want)
			}
			var ce *CheckError
			if !errors.As(err, &ce) || ce.Total != 1 || len(ce.Problems) != 1 {
				t.Errorf("error %#v, want one *CheckError problem", err)
			}
		})
	}
}

func TestCheckJSONIndex(t *testing.T) {
	el := func(key, site string) string {
		return fmt.Sprintf(`{"key":%q,"site":%q,"rtt_ms":40,"samples":1,"measured_at":"2026-01-02T03:04:05Z"}`, key, site)
	}
	in := "[" + el("IN", "bom") + "," + el("US", "iad") + "," + el("FR", "cdg") + "]"
	ms, err := ParseJSON("body", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if ms[2].Origin != (Origin{Name: "body", Pos: 2, JSON: true}) {
		t.Errorf("origin %+v", ms[2].Origin)
	}
	err = Check(ms, checkSites, checkNow)
	want := `body: [2]: site "cdg" is not a site of any latency-steered record (known: bom, fra, iad)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant  %s", err, want)
	}
	// The same prefix as a parse error for that element.
	_, perr := ParseJSON("body", strings.NewReader("["+el("IN", "bom")+","+el("US", "iad")+","+el("FR", "")+"]"))
	if perr == nil || !strings.HasPrefix(perr.Error(), "body: [2]: ") {
		t.Errorf("parse error %v", perr)
	}
}

func TestCheckNoSites(t *testing.T) {
	ms := []Measurement{{Key: "IN", Site: "bom", RTTms: 1, Samples: 1, MeasuredAt: checkNow}}
	for _, sites := range []map[string]bool{nil, {}, {"bom": false}} {
		err := Check(ms, sites, checkNow)
		want := `measurement 0: site "bom" is not a site of any latency-steered record (no record is latency-steered)`
		if err == nil || err.Error() != want {
			t.Errorf("%v: error %v, want %s", sites, err, want)
		}
	}
}

func TestCheckKnownTruncated(t *testing.T) {
	sites := map[string]bool{}
	for i := range 13 {
		sites[fmt.Sprintf("s%02d", 12-i)] = true
	}
	ms := []Measurement{{Key: "IN", Site: "x", RTTms: 1, Samples: 1, MeasuredAt: checkNow}}
	err := Check(ms, sites, checkNow)
	want := "(known: s00, s01, s02, s03, s04, s05, s06, s07, s08, s09 and 3 more)"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v, want suffix %s", err, want)
	}
}

// TestCheckInCode checks measurements built in code, which the parsers
// have not validated.
func TestCheckInCode(t *testing.T) {
	ok := Measurement{Key: "IN", Site: "bom", RTTms: 1, Samples: 1, MeasuredAt: checkNow}
	bad := []struct {
		m    func(m *Measurement)
		want string
	}{
		{func(m *Measurement) { m.Key = "continent:XX" }, "bad continent key"},
		{func(m *Measurement) { m.Key = "continent:ZZ" }, "bad continent key"},
		{func(m *Measurement) { m.Key = "XYZ" }, "bad key"},
		{func(m *Measurement) { m.Site = "" }, "empty site"},
		{func(m *Measurement) { m.Samples = 0 }, "bad samples"},
		{func(m *Measurement) { m.MeasuredAt = time.Time{} }, "missing measured_at"},
	}
	for _, b := range bad {
		m := ok
		b.m(&m)
		err := Check([]Measurement{ok, m}, checkSites, checkNow)
		if err == nil || !strings.HasPrefix(err.Error(), "measurement 1: "+b.want) {
			t.Errorf("%+v: error %v, want measurement 1: %s", m, err, b.want)
		}
	}
}

func TestCheckManyProblems(t *testing.T) {
	var in strings.Builder
	in.WriteString(csvLine("IN", "bom", checkNow))
	for range 8 {
		in.WriteString(csvLine("XX", "sin", checkNow)) // two problems each
	}
	ms, err := ParseCSV("lat.csv", strings.NewReader(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	err = Check(ms, checkSites, checkNow)
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("error %#v, want *CheckError", err)
	}
	if ce.Total != 16 || len(ce.Problems) != MaxProblems {
		t.Errorf("total %d, listed %d; want 16, %d", ce.Total, len(ce.Problems), MaxProblems)
	}
	for i, p := range ce.Problems {
		if want := fmt.Sprintf("lat.csv:%d: ", 2+i/2); !strings.HasPrefix(p, want) {
			t.Errorf("problem %d %q, want prefix %q", i, p, want)
		}
	}
	if s := err.Error(); !strings.HasSuffix(s, "; and 11 more problems") || strings.Count(s, "; ") != MaxProblems {
		t.Errorf("error %q", s)
	}
}

func TestOriginString(t *testing.T) {
	for o, want := range map[Origin]string{
		{}:                                 "",
		{Name: "a.csv", Pos: 7}:            "a.csv:7",
		{Name: "body", Pos: 0, JSON: true}: "body: [0]",
	} {
		if got := o.String(); got != want {
			t.Errorf("%+v: %q, want %q", o, got, want)
		}
	}
	ms, err := ParseCSV("a.csv", strings.NewReader("\n# x\n"+csvLine("IN", "bom", checkNow)))
	if err != nil || len(ms) != 1 || ms[0].Origin != (Origin{Name: "a.csv", Pos: 3}) {
		t.Errorf("CSV origin: %+v %v", ms, err)
	}
}
