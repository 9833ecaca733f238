package config_test

import "testing"

const metricsRecords = `zones: [{ origin: example.com, file: com.zone }]
records:
  - name: shop.example.com
    pools: { a: { address: 192.0.2.1 } }
    rules: [{ default: { pool: a } }]
  - name: api.eu.example.com
    pools: { a: { address: 192.0.2.2 } }
    rules: [{ default: { pool: a } }]
`

func TestMetricsBlock(t *testing.T) {
	c := mustParse(t, metricsRecords+`metrics:
  per_record: [SHOP.example.com., "*.eu.example.com"]
  target_labels: true
`)
	if !c.Metrics.TargetLabels {
		t.Error("target_labels not read")
	}
	for name, want := range map[string]bool{
		"shop.example.com.": true, "Shop.Example.Com": true, "api.eu.example.com.": true,
		"www.example.com.": false, "eu.example.com.": false,
	} {
		if got := c.Metrics.PerRecordMatch(name); got != want {
			t.Errorf("PerRecordMatch(%q) = %v, want %v", name, got, want)
		}
	}
	c = mustParse(t, metricsRecords)
	if c.Metrics.TargetLabels || c.Metrics.PerRecordMatch("shop.example.com.") {
		t.Error("metrics options on by default")
	}
}

func TestMetricsBlockProblems(t *testing.T) {
	_, ps := parse(t, metricsRecords+`metrics:
  per_record:
    - shop.example.com
    - nosuch.example.com
    - "[x"
    - ""
`)
	checkProblems(t, ps, []prob{
		{12, `metrics.per_record[1]: no steered record is named "nosuch.example.com"`},
		{13, `metrics.per_record[2]: "[x" is not a valid glob`},
		{14, `metrics.per_record[3]: empty name`},
	})
	_, ps = parse(t, metricsRecords+"metrics: { per_records: [shop.example.com] }\n")
	checkProblems(t, ps, []prob{{9, `unknown key "per_records" in metrics`}})
}
