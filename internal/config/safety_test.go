package config_test

import "testing"

const safetyRecords = `zones: [{ origin: example.com, file: com.zone }]
policies:
  pair:
    safety: { min_usable: 2 }
    rules: [{ default: { failover: [a, b] } }]
records:
  - name: shop.example.com
    pools: { a: { address: 192.0.2.1 }, b: { address: 192.0.2.2 }, c: { address: 192.0.2.3 } }
    rules: [{ default: { pool: a } }]
  - name: api.example.com
    policy: pair
    pools: { a: { address: 192.0.2.4 }, b: { address: 192.0.2.5 } }
`

// TestSafetyRules: the nearest rule applies (record, policy, top level)
// with where it is declared.
func TestSafetyRules(t *testing.T) {
	c := mustParse(t, safetyRecords+"safety: { min_usable: 3 }\n")
	rules := c.SafetyRules()
	if r := rules["shop.example.com."]; r.MinUsable != 3 || r.At != "steer.yaml:13" || r.Scope != "top level" {
		t.Errorf("shop: %+v", r)
	}
	if r := rules["api.example.com."]; r.MinUsable != 2 || r.At != "steer.yaml:4" || r.String() != "min_usable 2 (policy pair rule at steer.yaml:4)" {
		t.Errorf("api: %+v", r)
	}
	if rules := mustParse(t, safetyRecords).SafetyRules(); len(rules) != 1 {
		t.Errorf("without a top-level rule: %v", rules)
	}
}

// TestSafetyProblems: a rule below 1, and one a record cannot meet with
// every pool up, are refused naming the record and the rule's line.
func TestSafetyProblems(t *testing.T) {
	_, ps := parse(t, safetyRecords+"safety: { min_usable: 0 }\n")
	checkProblems(t, ps, []prob{{13, "safety.min_usable: 0 is below 1"}})
	_, ps = parse(t, safetyRecords+"safety: { min_usable: 4 }\n")
	checkProblems(t, ps, []prob{{7, "record shop.example.com: safety min_usable 4 (top level rule at steer.yaml:13) cannot be met even with every pool up: it has 3 enabled pools (a, b, c)"}})
	_, ps = parse(t, `zones: [{ origin: example.com, file: com.zone }]
records:
  - name: shop.example.com
    pools: { a: { address: 192.0.2.1 }, b: { address: 192.0.2.2, enabled: false } }
    safety: { min_usable: 2 }
    rules: [{ default: { pool: a } }]
`)
	checkProblems(t, ps, []prob{{5, "it has 1 enabled pools (a)"}})
}
