package config_test

import (
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/config"
)

// TestRUMKeys names the line of each bad value of the rum section.
func TestRUMKeys(t *testing.T) {
	_, err := config.Parse(nil, "steer.yaml", []byte(`api: { listen: "127.0.0.1:8053" }
rum:
  listen: "127.0.0.1:8053"
  weight: 1.5
  quantile: p90
  trusted_proxies: [cdn]
  interval: -1s
`))
	for _, want := range []string{
		`steer.yaml:3: rum.listen: "127.0.0.1:8053" is api.listen`,
		"steer.yaml:4: rum.weight: 1.5 is not between 0 and 1",
		`steer.yaml:5: rum.quantile: "p90" is not p50 or p75`,
		`steer.yaml:6: rum.trusted_proxies[0]: "cdn" is not a CIDR prefix`,
		"steer.yaml:7: rum.interval: must not be negative",
		"steer.yaml:2: rum.token_file: a token file is needed",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
