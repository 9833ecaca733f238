package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/rum"
)

// steer rum report asks the node's GET /v1/rum/report with the token and
// the thresholds given, and prints its tables (or the JSON); the node's
// 4xx message is the command's error.
func TestRUMReportCLI(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != "/v1/rum/report" {
			http.Error(w, `{"error":"no"}`, http.StatusUnauthorized)
			return
		}
		got = append(got, r.URL.RawQuery)
		if r.URL.Query().Get("name") == "nope.example.com" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"nope.example.com is not a steered record: not found"}`))
			return
		}
		// Two NL networks, one of them a VPN egress for users near sin.
		nl, _ := geo.LookupCountry("NL")
		place := geo.Info{Country: "NL", Continent: "EU", Lat: nl.Lat, Lon: nl.Lon, HasLocation: true}
		at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
		var aggs []rum.Aggregate
		for i, rtts := range [][2]float64{{20, 170}, {21, 175}, {19, 168}, {160, 12}} {
			b := rum.Truncate(netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, byte(2 + i), 77}), 32))
			aggs = append(aggs, rum.Aggregate{Block: b, Site: "fra", P50: rtts[0], P75: rtts[0], Count: 10, Total: 12, Last: at},
				rum.Aggregate{Block: b, Site: "sin", P50: rtts[1], P75: rtts[1], Count: 10, Total: 12, Last: at})
		}
		rep, err := rum.BuildReport(rum.ReportInput{Record: "www.example.com.", Aggregates: aggs, Now: at,
			Locate: func(netip.Prefix) geo.Info { return place }, Choose: func(netip.Prefix) string { return "fra" }}, rum.ReportOptions{})
		if err != nil {
			t.Error(err)
		}
		json.NewEncoder(w).Encode(rep)
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte("tok\n"), 0o600)

	var out, errb bytes.Buffer
	if code := run([]string{"rum", "report", "www.example.com", "--api", srv.URL, "--token-file", tokFile, "--country-factor", "2.5"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if len(got) != 1 || got[0] != "country_factor=2.5&name=www.example.com" {
		t.Errorf("query %v, want the record and country_factor only", got)
	}
	for _, want := range []string{"real-user measurements for www.example.com.", "4 networks", "NL", "192.0.5.0/24 ", "resembles",
		"networks GeoIP seems to misplace (their best site beats their country's best by 20%): 1", "sin 12.0", "fra 160.0"} {
		if !strings.Contains(strings.ToLower(out.String()), strings.ToLower(want)) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"rum", "report", "--api", srv.URL, "--token-file", tokFile, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var rep rum.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Misplaced) != 1 || rep.Misplaced[0].Block != "192.0.5.0/24" {
		t.Errorf("--json: %v %+v", err, rep.Misplaced)
	}
	errb.Reset()
	if code := run([]string{"rum", "report", "nope.example.com", "--api", srv.URL, "--token-file", tokFile}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "404") || !strings.Contains(errb.String(), "nope.example.com is not a steered record") {
		t.Errorf("unknown record: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"rum", "report", "a", "b", "--api", srv.URL}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "one record at most") {
		t.Errorf("two records: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"rum"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: steer rum report") {
		t.Errorf("no subcommand: exit %d, %s", code, errb.String())
	}
}
