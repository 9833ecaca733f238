package node

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/dnstest"
	"github.com/steer-dns/steer/internal/rum"
)

// GET /v1/rum/report on a running node: the beacons' block, where the
// database places it and what the policy answers it with; 404 for an
// unknown record, and without a beacon listener.
func TestRUMReportOnNode(t *testing.T) {
	t.Parallel()
	n := startNode(t, map[string]string{
		"steer.yaml": rumCfg(t, "0.7"), "token": "tok", "rumtoken": "k", "example.com.zone": zone("example.com", 1, "x"), "feed.json": `{}`,
	}, Options{})
	// Users in 192.0.2.0/24 (Pune, by its first address, as an ECS /24
	// query is placed) who measure fra far faster than bom, which
	// geography picks for them.
	var batch strings.Builder
	for range 4 {
		batch.WriteString(`{"client":"192.0.2.50","site":"bom","rtt_ms":90}` + "\n" + `{"client":"192.0.2.51","site":"fra","rtt_ms":20}` + "\n")
	}
	if code, _, body := n.beacon("POST", "k", "", batch.String()); code != 200 {
		t.Fatalf("beacons: %d %s", code, body)
	}
	var rep rum.Report
	dnstest.WaitFor(t, 5*time.Second, "the report sees the block steered to fra", func() bool {
		code, body := n.call("GET", "/v1/rum/report?min_count=1", "tok", "")
		if code != 200 || json.Unmarshal([]byte(body), &rep) != nil {
			t.Fatalf("GET /v1/rum/report: %d %s", code, body)
		}
		return len(rep.Countries) == 1 && rep.Countries[0].Chosen != nil && rep.Countries[0].Chosen.P75 < 30
	})
	c := rep.Countries[0]
	if rep.Record != "shop.example.com." || rep.Blocks != 1 || c.Country != "IN" || c.Best != "fra" || len(c.Sites) != 2 || rep.Options.Margin != 0.2 {
		t.Errorf("report %+v, country %+v", rep, c)
	}
	if code, body := n.call("GET", "/v1/rum/report?name=www.example.com", "tok", ""); code != 404 || !strings.Contains(body, "www.example.com is not a steered record") {
		t.Errorf("unknown record: %d %s", code, body)
	}
	noRUM := rumCfg(t, "0.7")
	noRUM = noRUM[:strings.Index(noRUM, "rum:")]
	plain := startNode(t, map[string]string{"steer.yaml": noRUM, "token": "tok", "example.com.zone": zone("example.com", 1, "x"), "feed.json": `{}`}, Options{})
	if code, body := plain.call("GET", "/v1/rum/report", "tok", ""); code != 404 || !strings.Contains(body, "no beacon listener") {
		t.Errorf("without rum: %d %s", code, body)
	}
}
