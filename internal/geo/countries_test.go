package geo

import (
	"bufio"
	"encoding/csv"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCountriesTable(t *testing.T) {
	all := Countries()
	if len(all) < 253 {
		t.Fatalf("Countries() has %d entries, want >= 253", len(all))
	}
	seen := make(map[string]bool, len(all))
	for i, c := range all {
		if len(c.Code) != 2 || c.Code[0] < 'A' || c.Code[0] > 'Z' || c.Code[1] < 'A' || c.Code[1] > 'Z' {
			t.Errorf("bad code %q", c.Code)
		}
		if seen[c.Code] {
			t.Errorf("duplicate code %q", c.Code)
		}
		seen[c.Code] = true
		if i > 0 && all[i-1].Code >= c.Code {
			t.Errorf("not sorted: %q before %q", all[i-1].Code, c.Code)
		}
		if c.Name == "" {
			t.Errorf("%s: empty name", c.Code)
		}
		if !IsContinent(c.Continent) {
			t.Errorf("%s: bad continent %q", c.Code, c.Continent)
		}
		if c.Lat < -90 || c.Lat > 90 || math.IsNaN(c.Lat) {
			t.Errorf("%s: latitude %v out of range", c.Code, c.Lat)
		}
		if c.Lon < -180 || c.Lon > 180 || math.IsNaN(c.Lon) {
			t.Errorf("%s: longitude %v out of range", c.Code, c.Lon)
		}
		got, ok := LookupCountry(c.Code)
		if !ok || got != c {
			t.Errorf("LookupCountry(%q) = %+v, %v; want %+v", c.Code, got, ok, c)
		}
	}
}

func TestCountriesReturnsCopy(t *testing.T) {
	a := Countries()
	a[0].Code = "??"
	if b := Countries(); b[0].Code == "??" {
		t.Fatal("Countries() exposes the internal table")
	}
	if _, ok := LookupCountry("??"); ok {
		t.Fatal("mutating the copy changed lookups")
	}
}

func TestSpotChecks(t *testing.T) {
	tests := []struct {
		code, continent string
	}{
		{"IN", "AS"}, {"DE", "EU"}, {"US", "NA"}, {"BR", "SA"}, {"AU", "OC"},
		{"ZA", "AF"}, {"AQ", "AN"}, {"RU", "EU"}, {"TR", "AS"}, {"XK", "EU"},
		{"EU", "EU"}, {"AP", "AS"}, {"AN", "NA"}, {"SG", "AS"}, {"PT", "EU"},
		{"JP", "AS"}, {"CY", "EU"}, {"KZ", "AS"}, {"GE", "AS"}, {"AM", "AS"},
		{"AZ", "AS"}, {"EG", "AF"}, {"PA", "NA"}, {"TT", "NA"}, {"GL", "NA"},
		{"UM", "OC"}, {"TF", "AN"}, {"BV", "AN"}, {"HM", "AN"}, {"GS", "AN"},
		{"IO", "AS"}, {"TL", "OC"}, {"GB", "EU"}, {"CN", "AS"},
	}
	for _, tt := range tests {
		c, ok := LookupCountry(tt.code)
		if !ok {
			t.Errorf("LookupCountry(%q) not found", tt.code)
			continue
		}
		if c.Continent != tt.continent {
			t.Errorf("%s continent = %q, want %q", tt.code, c.Continent, tt.continent)
		}
		if got := ContinentOf(tt.code); got != tt.continent {
			t.Errorf("ContinentOf(%q) = %q, want %q", tt.code, got, tt.continent)
		}
	}

	near := func(code string, lat, lon, tol float64) {
		t.Helper()
		c, ok := LookupCountry(code)
		if !ok {
			t.Errorf("%s missing", code)
			return
		}
		if math.Abs(c.Lat-lat) > tol || math.Abs(c.Lon-lon) > tol {
			t.Errorf("%s centroid = (%v, %v), want about (%v, %v)", code, c.Lat, c.Lon, lat, lon)
		}
	}
	near("IN", 21, 78, 2)
	near("DE", 51, 10, 2)
	near("SG", 1.35, 103.8, 1)
	near("PT", 39.5, -8, 2)
	near("JP", 36, 138, 3)
	near("EU", 50, 10, 0.5)
	near("AP", 15, 105, 0.5)
	near("AN", 12.2, -69, 0.5)
}

func TestLookupMisses(t *testing.T) {
	for _, code := range []string{"", "X", "ZZ", "QQ", "USA", "U1", "--"} {
		if c, ok := LookupCountry(code); ok {
			t.Errorf("LookupCountry(%q) = %+v, want miss", code, c)
		}
		if got := ContinentOf(code); got != "" {
			t.Errorf("ContinentOf(%q) = %q, want empty", code, got)
		}
	}
	if c, ok := LookupCountry("de"); !ok || c.Code != "DE" {
		t.Errorf(`LookupCountry("de") = %+v, %v`, c, ok)
	}
	if got := ContinentOf("jP"); got != "AS" {
		t.Errorf(`ContinentOf("jP") = %q`, got)
	}
}

func TestIsContinent(t *testing.T) {
	for _, s := range []string{"AF", "AN", "AS", "EU", "NA", "OC", "SA"} {
		if !IsContinent(s) {
			t.Errorf("IsContinent(%q) = false", s)
		}
	}
	for _, s := range []string{"", "eu", "AM", "AP", "US", "EUR", "XX"} {
		if IsContinent(s) {
			t.Errorf("IsContinent(%q) = true", s)
		}
	}
}

func TestLookupCountryAllocs(t *testing.T) {
	codes := []string{"DE", "in", "ZZ", "Us", ""}
	allocs := testing.AllocsPerRun(100, func() {
		for _, c := range codes {
			LookupCountry(c)
			ContinentOf(c)
		}
	})
	if allocs != 0 {
		t.Fatalf("LookupCountry allocates %v times per run", allocs)
	}
}

// larkbookCSV locates the shared synthetic GeoIP test data, which lives next
// to the module (../shared relative to the module root).
func larkbookCSV(t *testing.T) string {
	t.Helper()
	candidates := []string{
		filepath.Join("..", "..", "..", "shared", "testdata", "geo", "larkbook-networks.csv"),
		"/work/shared/testdata/geo/larkbook-networks.csv",
	}
	if root, err := filepath.Abs(filepath.Join("..", "..")); err == nil {
		if real, err := filepath.EvalSymlinks(filepath.Join(root, "..", "shared")); err == nil {
			candidates = append(candidates, filepath.Join(real, "testdata", "geo", "larkbook-networks.csv"))
		}
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("larkbook-networks.csv not found")
	return ""
}

func TestLarkbookCountriesAgree(t *testing.T) {
	path := larkbookCSV(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Drop '#' comment lines before handing the rest to encoding/csv.
	var body strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(strings.NewReader(body.String()))
	header, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	ci, ok1 := col["country_iso_code"]
	ki, ok2 := col["continent_code"]
	if !ok1 || !ok2 {
		t.Fatalf("%s: header %v lacks country_iso_code/continent_code", path, header)
	}
	checked := 0
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		code, cont := rec[ci], rec[ki]
		if code == "" {
			continue // continent-only rows
		}
		checked++
		c, ok := LookupCountry(code)
		if !ok {
			t.Errorf("%s: country %q not in table", path, code)
			continue
		}
		if c.Continent != cont {
			t.Errorf("%s: country %s has continent %q in CSV, %q in table", path, code, cont, c.Continent)
		}
	}
	if checked == 0 {
		t.Fatalf("%s: no rows with a country code", path)
	}
}
