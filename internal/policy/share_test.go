package policy_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/config"
	"github.com/steer-dns/steer/internal/policy"
)

// shareRecords is n records over the same geo rules with their own pools
// and TTLs, plus one record with a different policy and one whose
// geoproximity pools sit elsewhere.
func shareRecords(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `
  - name: r%d.example.com
    ttl: %d
    pools:
      in:  { address: 203.0.113.%d, location: { lat: 19.08, lon: 72.88 } }
      eu:  { address: 198.51.100.%d, location: { lat: 50.11, lon: 8.68 } }
      us:  { address: 192.0.2.%d, location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN, LK] }
        pool: in
      - match: { continent: EU }
        split: [{ pool: eu, weight: 3 }, { pool: us, weight: 1 }]
        sticky: client_subnet
      - default: { by: geoproximity }
`, i, 30+i, i+1, i+1, i+1)
	}
	b.WriteString(`
  - name: other.example.com
    pools:
      in:  { address: 203.0.113.200, location: { lat: 19.08, lon: 72.88 } }
      eu:  { address: 198.51.100.200, location: { lat: 50.11, lon: 8.68 } }
      us:  { address: 192.0.2.200, location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: DE }
        pool: eu
      - match: { cidr: [49.36.0.0/14, 2001:db8::/33, 8.8.8.0/24] }
        pool: us
      - default: { by: geoproximity }
  - name: moved.example.com
    pools:
      in:  { address: 203.0.113.201, location: { lat: 1.35, lon: 103.82 } }
      eu:  { address: 198.51.100.201, location: { lat: 50.11, lon: 8.68 } }
      us:  { address: 192.0.2.201, location: { lat: 38.95, lon: -77.45 } }
    rules:
      - match: { country: [IN, LK] }
        pool: in
      - match: { continent: EU }
        split: [{ pool: eu, weight: 3 }, { pool: us, weight: 1 }]
        sticky: client_subnet
      - default: { by: geoproximity }
`)
	return b.String()
}

// Records with the same rules share one compiled partition and decide
// exactly as if each had its own: same pools (by position), rule and ECS
// scope for random clients. Different rules or moved geoproximity pools
// get their own.
func TestSharedPartitionsDecideAsOwn(t *testing.T) {
	yaml := configYAML(t, []string{cityDB}, shareRecords(6))
	shared := mustBuild(t, yaml)
	if shared.Compiled != 3 || shared.Shared != 5 {
		t.Fatalf("compiled %d partitions, %d records sharing; want 3 and 5", shared.Compiled, shared.Shared)
	}
	// The reference: every record compiled alone.
	own := map[string]*policy.Record{}
	for _, r := range shared.Records {
		one := mustBuild(t, configYAML(t, []string{cityDB}, recordYAML(t, yaml, r.Name)))
		own[r.Name] = one.Records[0]
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 4000; i++ {
		var a netip.Addr
		bits := 24
		if i%2 == 0 {
			a = netip.AddrFrom4([4]byte{byte(rng.IntN(224)), byte(rng.IntN(256)), byte(rng.IntN(256)), 0})
		} else {
			var b [16]byte
			b[0], b[1] = 0x20, byte(rng.IntN(16))
			for j := 2; j < 6; j++ {
				b[j] = byte(rng.IntN(256))
			}
			a, bits = netip.AddrFrom16(b), 48
		}
		for _, r := range shared.Records {
			q := query(r, a.String(), bits, "192.0.2.53")
			got, want := r.Decide(q), own[r.Name].Decide(query(own[r.Name], a.String(), bits, "192.0.2.53"))
			if got != want {
				t.Fatalf("%s for %s/%d: shared partition decides %+v, its own %+v", r.Name, a, bits, got, want)
			}
		}
	}
	if got := shared.Get("r3.example.com.").TTL; got != 33 {
		t.Fatalf("a sharing record keeps its own TTL: %d", got)
	}
}

// recordYAML cuts record name's block out of a config's records.
func recordYAML(t *testing.T, yaml, name string) string {
	t.Helper()
	name = strings.TrimSuffix(name, ".")
	_, recs, _ := strings.Cut(yaml, "records:")
	for _, block := range strings.Split(recs, "\n  - ") {
		if strings.HasPrefix(block, "name: "+name+"\n") {
			return "\n  - " + block
		}
	}
	t.Fatalf("no record %s", name)
	return ""
}

// A reload against the same databases reuses every unchanged partition
// and compiles only what changed.
func TestBuildWithReusesUnchangedPartitions(t *testing.T) {
	yaml := configYAML(t, []string{cityDB}, shareRecords(4))
	cfg, err := config.Parse(nil, "steer.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	g := geoSetFor(t, cityDB)
	first, _, err := policy.BuildWith(cfg, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One record's rules change, another's weights do not matter to
	// compilation (splits are decided per query), addresses change.
	edited := strings.Replace(yaml, "match: { country: DE }", "match: { country: FR }", 1)
	edited = strings.Replace(edited, "203.0.113.1,", "203.0.113.99,", 1)
	cfg2, err := config.Parse(nil, "steer.yaml", []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := policy.BuildWith(cfg2, g, first)
	if err != nil {
		t.Fatal(err)
	}
	if second.Compiled != 1 || second.Reused != 2 {
		t.Fatalf("after changing one policy: compiled %d, reused %d; want 1 and 2", second.Compiled, second.Reused)
	}
	if r := second.Get("other.example.com."); r.Decide(query(r, "91.64.1.0", 24, "")).Rule == 0 {
		t.Fatalf("the changed record still decides with its old rules")
	}
	// Another geo set: nothing is reused.
	third, _, err := policy.BuildWith(cfg2, geoSetFor(t, cityDB), second)
	if err != nil {
		t.Fatal(err)
	}
	if third.Reused != 0 || third.Compiled != 3 {
		t.Fatalf("against other databases: compiled %d, reused %d; want 3 and 0", third.Compiled, third.Reused)
	}
}

// policies: NAME defines rules once; records refer to it with policy:
// NAME, decide as with the same rules inline, and share one partition.
// Mistakes in a policy point at the policy's lines; its warnings come
// once, not once per record.
func TestNamedPolicies(t *testing.T) {
	pools := `
    pools:
      in:  { address: 203.0.113.%[1]d, location: { lat: 19.08, lon: 72.88 } }
      eu:  { address: 198.51.100.%[1]d, location: { lat: 50.11, lon: 8.68 } }
      us:  { address: 192.0.2.%[1]d, location: { lat: 38.95, lon: -77.45 } }`
	rules := `
      - match: { country: [IN, LK] }
        pool: in
      - match: { country: IN }   # shadowed
        pool: eu
      - default: { by: geoproximity }`
	var recs strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&recs, "\n  - name: n%d.example.com\n    policy: larkbook-geo"+pools, i)
	}
	fmt.Fprintf(&recs, "\n  - name: inline.example.com"+pools+"\n    rules:"+rules, 99)
	yaml := configYAML(t, []string{cityDB}, recs.String()) + "\npolicies:\n  larkbook-geo:\n    rules:" + rules + "\n"
	table, warns, err := build(t, yaml)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, numbered(yaml))
	}
	if table.Compiled != 1 || table.Shared != 50 {
		t.Fatalf("compiled %d, shared %d; want 1 partition for all 51 records", table.Compiled, table.Shared)
	}
	shadowed := 0
	for _, w := range warns {
		if strings.Contains(w.Msg, "never") || strings.Contains(w.Msg, "shadow") {
			shadowed++
		}
	}
	if shadowed != 2 { // once for the policy, once for the inline record
		t.Fatalf("%d shadowing warnings, want 2 (one per rule set, not per record):\n%v", shadowed, warns)
	}
	inline := table.Get("inline.example.com.")
	for _, c := range []string{"49.36.0.0", "91.64.0.0", "8.8.8.0", "203.0.113.0"} {
		for i := 1; i <= 50; i += 7 {
			r := table.Get(fmt.Sprintf("n%d.example.com.", i))
			if got, want := r.Decide(query(r, c, 24, "")), inline.Decide(query(inline, c, 24, "")); got != want {
				t.Fatalf("%s for %s: %+v by the policy, %+v inline", r.Name, c, got, want)
			}
		}
	}
	// Mistakes.
	bad := configYAML(t, []string{cityDB}, "\n  - name: a.example.com\n    policy: nosuch # <-"+fmt.Sprintf(pools, 1))
	_, _, err = build(t, bad)
	expectProblem(t, "error", problems(t, err), lineOf(t, bad, "# <-"), `no policy "nosuch"`)
	both := configYAML(t, []string{cityDB}, "\n  - name: a.example.com\n    policy: p"+fmt.Sprintf(pools, 1)+"\n    rules: # <-\n      - default: { pool: in }") +
		"\npolicies:\n  p:\n    rules:\n      - default: { pool: in }\n"
	_, _, err = build(t, both)
	expectProblem(t, "error", problems(t, err), lineOf(t, both, "# <-"), "has rules and policy p")
	inPolicy := configYAML(t, []string{cityDB}, "\n  - name: a.example.com\n    policy: p"+fmt.Sprintf(pools, 1)) +
		"\npolicies:\n  p:\n    rules:\n      - default: { pool: sin } # <-\n"
	_, _, err = build(t, inPolicy)
	expectProblem(t, "error", problems(t, err), lineOf(t, inPolicy, "# <-"), "sin")
}
