package rum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/geo"
)

// reportWorld is a small synthetic world: blocks by country, their
// measured p75 per site, and the policy's choice per block.
type reportWorld struct {
	aggs    []Aggregate
	place   map[netip.Prefix]geo.Info
	chosen  map[netip.Prefix]string
	nextNet int
}

func newReportWorld() *reportWorld {
	return &reportWorld{place: map[netip.Prefix]geo.Info{}, chosen: map[netip.Prefix]string{}}
}

// add adds one block placed in country, with p75 (and p50 = 0.9 p75) to
// each site as "site=ms" pairs, count beacons per cell, chosen by the
// policy for site chosen; it returns the block.
func (w *reportWorld) add(country, chosen string, count float64, rtts ...string) netip.Prefix {
	w.nextNet++
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(w.nextNet >> 8), byte(w.nextNet), 0}), 24)
	c, _ := geo.LookupCountry(country)
	w.place[p] = geo.Info{Country: country, Continent: c.Continent, Lat: c.Lat, Lon: c.Lon, HasLocation: true}
	w.chosen[p] = chosen
	for _, r := range rtts {
		site, ms, _ := strings.Cut(r, "=")
		var v float64
		fmt.Sscan(ms, &v)
		w.aggs = append(w.aggs, Aggregate{Block: p, Site: site, P50: 0.9 * v, P75: v, Count: count, Total: uint64(count) + 7, Last: t0})
	}
	return p
}

func (w *reportWorld) report(t *testing.T, o ReportOptions) *Report {
	t.Helper()
	rep, err := BuildReport(ReportInput{Record: "www.example.com.", Aggregates: w.aggs, Now: t0,
		Locate: func(p netip.Prefix) geo.Info { return w.place[p] },
		Choose: func(p netip.Prefix) string { return w.chosen[p] }}, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// europe is four neighbouring countries steered to fra; NL also hosts a
// VPN egress whose users are in Singapore, and DE a mobile network that
// is slower everywhere.
func europe(w *reportWorld, vpnChosen string) (vpn, mobile netip.Prefix) {
	for range 5 {
		w.add("DE", "fra", 20, "fra=20", "iad=100", "sin=170")
		w.add("FR", "fra", 20, "fra=24", "iad=95", "sin=175")
		w.add("PL", "fra", 20, "fra=26", "iad=115", "sin=165")
		w.add("NL", "fra", 20, "fra=22", "iad=98", "sin=172")
		w.add("SG", "sin", 20, "fra=165", "iad=230", "sin=8")
	}
	// Three VPN blocks: NL has 8, so they are more than a quarter.
	for range 3 {
		vpn = w.add("NL", vpnChosen, 20, "fra=160", "iad=225", "sin=12")
	}
	mobile = w.add("DE", "fra", 20, "fra=60", "iad=140", "sin=210")
	return vpn, mobile
}

func TestReportFindsWhereGeoIPIsWrong(t *testing.T) {
	w := newReportWorld()
	vpn, mobile := europe(w, "fra") // geography steers the VPN users to fra
	rep := w.report(t, ReportOptions{})

	// NL's p75 to what it is steered to is the VPN users' 160 ms: far
	// above DE, FR and PL (~20-26 ms).
	if len(rep.FarAbove) != 1 || rep.FarAbove[0].Country != "NL" {
		t.Fatalf("far above: %+v, want NL only", rep.FarAbove)
	}
	f := rep.FarAbove[0]
	if !slices.Equal(f.NeighbourList, []string{"DE", "FR", "PL"}) {
		t.Errorf("NL's neighbours %v, want DE FR PL (within 2000 km; SG is not)", f.NeighbourList)
	}
	if f.P75 < 140 || f.Neighbours > 30 || f.Count != 160 || f.Blocks != 8 {
		t.Errorf("NL finding %+v: want p75 >= 140 over 8 blocks (count 160), neighbours' <= 30", f)
	}
	// The VPN blocks, and only they, are misplaced; the mobile network
	// is slow everywhere but best served where its country is.
	var mis []string
	for _, m := range rep.Misplaced {
		mis = append(mis, m.Block)
		if m.Country != "NL" || m.Best != "sin" || m.Versus != "fra" || m.Resembles != "SG" || m.Count != 40 || m.Total != 54 {
			t.Errorf("misplaced %+v: want NL, best sin vs fra, resembling SG, 40 beacons (54 ever)", m)
		}
	}
	if len(mis) != 3 || !slices.Contains(mis, vpn.String()) || slices.Contains(mis, mobile.String()) {
		t.Errorf("misplaced %v, want the 3 VPN blocks (%s among them) and not the mobile network %s", mis, vpn, mobile)
	}
	// Steered to fra while sin is 12 ms: off their best.
	if len(rep.OffBest) != 3 || rep.OffBest[0].Chosen != "fra" || rep.OffBest[0].Best != "sin" {
		t.Errorf("off best %+v, want the 3 VPN blocks steered to fra", rep.OffBest)
	}
	// Per country and per site p75s and counts.
	var nl *CountryReport
	for i := range rep.Countries {
		if rep.Countries[i].Country == "NL" {
			nl = &rep.Countries[i]
		}
	}
	if nl == nil || nl.Blocks != 8 || len(nl.Sites) != 3 || nl.Best != "fra" || nl.Sites[1].Site != "iad" || nl.Sites[1].Count != 160 {
		t.Fatalf("NL row %+v", nl)
	}
	if rep.Blocks != 29 || rep.Cells != 87 || len(rep.Sites) != 3 || rep.Sites[2].Site != "sin" || rep.Sites[2].Blocks != 29 {
		t.Errorf("totals: %d blocks %d cells, sites %+v", rep.Blocks, rep.Cells, rep.Sites)
	}

	// The policy follows the measurements (the latency map took them):
	// nothing is off its best, NL's p75 comes down, and the misplaced
	// networks are still listed, for GeoIP is still wrong.
	w2 := newReportWorld()
	europe(w2, "sin")
	rep2 := w2.report(t, ReportOptions{})
	if len(rep2.OffBest) != 0 || len(rep2.FarAbove) != 0 || len(rep2.Misplaced) != 3 {
		t.Errorf("steered by measurement: off best %d, far above %+v, misplaced %d; want 0, none, 3", len(rep2.OffBest), rep2.FarAbove, len(rep2.Misplaced))
	}

	// The threshold is the operator's: at 10x nothing is far enough.
	if r := w.report(t, ReportOptions{CountryFactor: 10}); len(r.FarAbove) != 0 {
		t.Errorf("country_factor 10: %+v listed", r.FarAbove)
	}
	// Cells under min_count take no part.
	if r := w.report(t, ReportOptions{MinCount: 21}); r.Blocks != 0 || len(r.Countries) != 0 || r.Cells != 87 {
		t.Errorf("min_count 21: %d blocks, %d countries, %d cells", r.Blocks, len(r.Countries), r.Cells)
	}

	// JSON and text carry the findings.
	b, _ := json.Marshal(rep)
	for _, want := range []string{`"countries_far_above_neighbours":[{"country":"NL"`, `"networks_misplaced":[{"block":"10.0.`, `"resembles":"SG"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
	var txt bytes.Buffer
	rep.WriteText(&txt, 2)
	for _, want := range []string{"countries far above their neighbours", "NL  ", "networks GeoIP seems to misplace (their best site beats their country's best by 20%): 3",
		"networks steered off their measured best by more than 20%: 3", "... and 1 more"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
}

// A difference within the margin is no finding: the policy choosing a
// site 10 % slower than the best is what anti-flap does.
func TestReportMargin(t *testing.T) {
	w := newReportWorld()
	w.add("DE", "iad", 10, "fra=50", "iad=55")
	w.add("DE", "iad", 10, "fra=50", "iad=70")
	rep := w.report(t, ReportOptions{})
	if len(rep.OffBest) != 1 || rep.OffBest[0].VersusP75 != 70 {
		t.Errorf("off best %+v, want only the block 40%% off", rep.OffBest)
	}
	if r := w.report(t, ReportOptions{Margin: 0.5}); len(r.OffBest) != 0 {
		t.Errorf("margin 50%%: %+v", r.OffBest)
	}
}

// One block alone gives its own p75 back; blocks mix by their counts.
func TestReportMixture(t *testing.T) {
	var m mixture
	m.add(&Aggregate{P50: 10, P75: 20, Count: 4})
	if got := m.p75(); got != 20 {
		t.Errorf("one block: p75 %v, want 20", got)
	}
	// A block with 3x the weight at 100 ms: more than a quarter of all
	// beacons are there, so the p75 is there.
	m.add(&Aggregate{P50: 100, P75: 110, Count: 12})
	if got := m.p75(); got < 100 {
		t.Errorf("mixed: p75 %v, want >= 100", got)
	}
	var e mixture
	if e.p75() != 0 {
		t.Error("empty mixture")
	}
}

func TestReportOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		o    ReportOptions
		want string
	}{
		{ReportOptions{CountryFactor: 0.9}, "country_factor 0.9"},
		{ReportOptions{NeighbourKm: -1}, "neighbour_km -1"},
		{ReportOptions{Margin: 1.5}, "margin 1.5"},
		{ReportOptions{MinCount: math.Inf(1)}, "min_count +Inf"},
	} {
		_, err := BuildReport(ReportInput{}, tt.o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.o, err, tt.want)
		}
	}
	rep, err := BuildReport(ReportInput{Now: t0.Add(time.Hour)}, ReportOptions{})
	if err != nil || rep.Blocks != 0 || rep.Options.CountryFactor != DefaultCountryFactor {
		t.Errorf("empty: %+v %v", rep, err)
	}
}
