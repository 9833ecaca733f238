package node

import (
	"encoding/json"
	"testing"
)

// /v1/status shows the node's identity and how it steers unknown clients.
func TestStatusShowsNode(t *testing.T) {
	n := startNode(t, map[string]string{
		"steer.yaml": `api: { listen: "127.0.0.1:0" }
node: { name: fra-1, region: eu, country: de, location: { lat: 50.11, lon: 8.68 } }
ecs: { unknown_client: node, anycast_resolvers: [1.1.1.0/24] }
zones:
  - origin: example.com
    file: example.com.zone
`,
		"example.com.zone": zone("example.com", 1, "x"),
	}, Options{})
	code, body := n.call("GET", "/v1/status", "", "")
	var st struct {
		Node struct {
			Name, Region, Country string
			Lat                   float64
			UnknownClient         string   `json:"unknown_client"`
			AnycastResolvers      []string `json:"anycast_resolvers"`
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("%d %v %s", code, err, body)
	}
	if nd := st.Node; nd.Name != "fra-1" || nd.Region != "eu" || nd.Country != "DE" || nd.Lat != 50.11 || nd.UnknownClient != "node" || len(nd.AnycastResolvers) != 1 {
		t.Errorf("node %+v in %s", nd, body)
	}
}
