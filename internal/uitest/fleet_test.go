package uitest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/etcdtest"
)

// TestFleetPage runs three steer serve processes on one etcd (Debian's
// etcd-server) with a pushed configuration whose pools are checked by
// every node: node 2's fleet page lists all three nodes, and each
// observer's verdict of each target, up for the live one and down for the
// one nothing listens on.
func TestFleetPage(t *testing.T) {
	t.Parallel() // waits on processes: overlaps the others
	b := browser(t)
	etcd := etcdtest.StartProcess(t)
	dir := t.TempDir()
	port := commonPort(t, "127.0.0.8", "127.0.0.9")
	startTarget(t, fmt.Sprintf("127.0.0.8:%d", port))
	// 127.0.0.9 has nothing listening: every observer finds it down.
	write(t, filepath.Join(dir, "token"), token+"\n")
	write(t, filepath.Join(dir, "push/zones/example.com.zone"), zone(t))
	push := write(t, filepath.Join(dir, "push/steer.yaml"), fmt.Sprintf(`zones:
  - { origin: example.com, file: zones/example.com.zone }
health_checks:
  tcp: { type: tcp, port: %d, interval: 300ms, timeout: 200ms, rise: 1, fall: 2 }
records:
  - name: shop.example.com
    ttl: 2
    pools:
      live: { address: 127.0.0.8, location: { lat: 50.11, lon: 8.68 }, health_check: tcp }
      dead: { address: 127.0.0.9, location: { lat: 19.08, lon: 72.88 }, health_check: tcp }
    rules:
      - default: { failover: [dead, live] }
`, port))
	if out, err := exec.Command(steerBin, "fleet", "push", "--config", push, "--etcd", etcd.Endpoint()).CombinedOutput(); err != nil {
		t.Fatalf("fleet push: %v\n%s", err, out)
	}
	var apis []string
	for i := 1; i <= 3; i++ {
		ports := freePorts(t, 2)
		api := fmt.Sprintf("127.0.0.1:%d", ports[1])
		cfg := write(t, filepath.Join(dir, fmt.Sprintf("n%d/steer.yaml", i)), fmt.Sprintf(`listen: ["127.0.0.1:%d"]
api: { listen: %q, token_file: ../token }
state_dir: state
fleet:
  node: n%d
  etcd: { endpoints: [%s], dial_timeout: 1s }
  lease_ttl: 2s
  health_quorum: { hold_down: 0s }
`, ports[0], api, i, etcd.Endpoint()))
		startSteer(t, cfg)
		apis = append(apis, api)
	}
	p := b.NewPage(t, "http://"+apis[1])
	p.Login(token)
	p.Hash("#/fleet")
	start := time.Now()
	p.WaitFor(15*time.Second, "node 2's fleet page to list n1, n2 and n3", `['n1','n2','n3'].every((n) => document.querySelector('table#nodes tr[data-node="' + n + '"]'))`)
	for _, n := range []string{"n1", "n2", "n3"} {
		for _, cell := range []string{".digest", ".view-age", ".health-mode"} {
			if got := p.Texts(fmt.Sprintf(`table#nodes tr[data-node=%q] %s`, n, cell)); len(got) != 1 || got[0] == "" {
				t.Errorf("node %s: %s is %q", n, cell, got)
			}
		}
	}
	// Each observer's verdict, for the live target and the dead one.
	verdicts := func(addr string) string {
		return fmt.Sprintf(`Array.from(document.querySelectorAll('table#targets tr[data-target]')).filter((r) => r.dataset.target.includes(%q))
  .map((r) => ['n1','n2','n3'].map((n) => { const c = r.querySelector('td.observer[data-observer="' + n + '"]'); return n + '=' + (c ? c.textContent.trim() : '?'); }).join(' ') + ' verdict=' + (r.querySelector('td.verdict') || {textContent: '?'}).textContent.trim()).join('; ')`, addr)
	}
	want := map[string]string{"127.0.0.8": "n1=up n2=up n3=up", "127.0.0.9": "n1=down n2=down n3=down"}
	for addr, w := range want {
		deadline := time.Now().Add(15 * time.Second)
		var got string
		for time.Now().Before(deadline) {
			got = Eval[string](p, verdicts(addr))
			if strings.HasPrefix(got, w+" verdict=") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.HasPrefix(got, w+" verdict=") {
			t.Errorf("target %s on node 2's fleet page: %q, want %q and the verdict", addr, got, w)
			continue
		}
		if v := strings.TrimPrefix(got, w+" verdict="); !strings.Contains(v, strings.Fields(w)[0][3:]) {
			t.Errorf("target %s: the fleet's verdict is %q, want %s", addr, v, strings.Fields(w)[0][3:])
		}
		t.Logf("target %s: %s", addr, got)
	}
	t.Logf("fleet page complete %v after login", time.Since(start).Round(time.Millisecond))
	p.Screenshot(ArtifactDir(t), "fleet.png", "")
	// The explain form offers every node of the fleet to answer as.
	p.Hash("#/explain")
	p.WaitFor(10*time.Second, "explain's node choice to list n1, n2 and n3",
		`['n1','n2','n3'].every((n) => Array.from(document.querySelectorAll('select#explain-node option')).some((o) => o.value === n || o.textContent.includes(n)))`)
}
