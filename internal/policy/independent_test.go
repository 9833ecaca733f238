package policy_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestClientIndependentRecordsSkipTheWalk: a record whose only rule is a
// default that looks at nothing of the client (failover, weighted,
// multivalue) has one outcome for the whole address space. Compiling it
// must not walk the databases' networks: ten such records (distinct
// policies, so none shares another's partition) against the embedded
// database cost little more than one. Walking, each allocated a trie
// sized to the database's networks (megabytes).
func TestClientIndependentRecordsSkipTheWalk(t *testing.T) {
	records := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "\n  - name: r%d.example.com\n    pools:\n", i)
			var names []string
			for p := range i + 2 { // i+2 pools: a distinct compile key per record
				fmt.Fprintf(&b, "      p%d: { address: 192.0.2.%d }\n", p, p+1)
				names = append(names, fmt.Sprintf("p%d", p))
			}
			fmt.Fprintf(&b, "    rules:\n      - default: { failover: [%s] }\n", strings.Join(names, ", "))
		}
		return b.String()
	}
	allocated := func(n int) uint64 {
		yaml := configYAML(t, []string{embedDB}, records(n))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		table := mustBuild(t, yaml)
		runtime.ReadMemStats(&after)
		for i := range n {
			r := table.Get(fmt.Sprintf("r%d.example.com.", i))
			if r == nil {
				t.Fatalf("r%d missing", i)
			}
			for _, c := range []string{"1.2.3.4", "203.0.113.9", "2001:db8::1", "8.8.8.8"} {
				d := r.Decide(query(r, c, 24, ""))
				if got := poolNames(r, d.Pools); got != "p0" || d.Scope != 0 {
					t.Errorf("r%d for %s: %s scope /%d, want p0 scope /0", i, c, got, d.Scope)
				}
			}
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	openDB(t, embedDB) // opened once per test binary, before measuring
	one, eleven := allocated(1), allocated(11)
	per := (int64(eleven) - int64(one)) / 10
	t.Logf("built 1 record: %d KiB allocated; 11: %d KiB; %d KiB per added record", one>>10, eleven>>10, per>>10)
	if per > 128<<10 {
		t.Errorf("each failover record allocated %d KiB: its compile walks the database's networks", per>>10)
	}
}
