package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/internal/geo"
	"github.com/steer-dns/steer/internal/node"
)

// The steered record and its two pools, as the config writes them.
const (
	recordName = "shop.example.com."
	stableAddr = "192.0.2.30"
	canaryAddr = "192.0.2.31"
)

// Pool indices in the generator's counters.
const (
	poolStable = iota
	poolCanary
	poolOther // an answer with neither address (SERVFAIL, empty): counted apart
	numPools
)

// Loopback source addresses steer sees: the big Unbound, the ECS Unbound,
// and the emulated small resolvers (127.0.1.1 …).
var (
	bigOut   = netip.MustParseAddr("127.0.0.2")
	ecsOut   = netip.MustParseAddr("127.0.0.3")
	smallNet = netip.MustParsePrefix("127.0.1.0/24")
)

// smallAddr is the i-th emulated small resolver's address.
func smallAddr(i int) netip.Addr {
	b := smallNet.Addr().As4()
	b[3] = byte(i + 1)
	return netip.AddrFrom4(b)
}

// steerConfig is the configuration steer serves: one zone, the steered
// record shop.example.com with a 95/5 split stable/canary for every
// client, written as two rules (continent NA/SA, then the default) so that
// the compiled partition gives the ECS site's real-world /24s scopes of
// their own: the widest prefix the geo database keeps on one side of the
// NA/SA boundary (/8 … /24), which is what the ECS Unbound caches under.
func steerConfig(dnsPort, apiPort int, ttl int) string {
	return fmt.Sprintf(`listen: ["127.0.0.1:%d"]
zones:
  - origin: example.com
    file: example.com.zone
geo:
  databases: [embedded]
ecs: { enabled: true, max_source_v4: 24, max_source_v6: 56 }
query_log: { path: query.log }
api: { listen: "127.0.0.1:%d" }
records:
  - name: shop.example.com
    type: A
    ttl: %d
    pools:
      stable: { address: %s }
      canary: { address: %s }
    rules:
      - match: { continent: [NA, SA] }
        split:
          - { pool: stable, weight: 95 }
          - { pool: canary, weight: 5 }
      - default:
          split:
            - { pool: stable, weight: 95 }
            - { pool: canary, weight: 5 }
`, dnsPort, apiPort, ttl, stableAddr, canaryAddr)
}

const zoneText = `$ORIGIN example.com.
$TTL 3600
@   IN SOA ns1.example.com. hostmaster.example.com. 1 7200 3600 1209600 300
    IN NS  ns1
ns1 IN A   192.0.2.53
`

// unboundConf is an Unbound 1.17 configuration for one site, on
// 127.0.0.1:port, sending its queries for example.com from out to steer
// (a stub zone). What is set and why (the model's assumptions):
//
//   - so-rcvbuf 4m: room for a burst of queries while the machine is
//     busy with other work, so that few are lost;
//   - num-threads 1: one cache (Unbound's threads share the message
//     cache anyway; one thread keeps the CPU low on a shared machine);
//   - prefetch no, serve-expired no, cache-min-ttl 0: an entry lives the
//     TTL steer gave and is then fetched again by the next query after
//     expiry, as the model's renewal process says (these are Unbound's
//     defaults, written out so a packaged default cannot change them);
//   - qname-minimisation no: one query to steer per miss, for the asked
//     name only (with it, the name one label under the stub zone is asked
//     directly anyway; off makes it certain);
//   - module-config "iterator" (the big site) or "subnetcache iterator"
//     (the ECS site) with send-client-subnet for steer's address,
//     client-subnet-always-forward yes (the clients' ECS option is sent on
//     and the plain cache is not used), max-client-subnet-ipv4 24 and
//     max-ecs-tree-size-ipv4 4096: the default keeps at most 100 subnets
//     per name and would evict entries the model keeps.
func unboundConf(dir string, port int, out netip.Addr, ecs bool, steer netip.AddrPort) string {
	mods, extra := "iterator", ""
	if ecs {
		mods = "subnetcache iterator"
		extra = fmt.Sprintf(`	send-client-subnet: %s
	client-subnet-always-forward: yes
	max-client-subnet-ipv4: 24
	max-client-subnet-ipv6: 56
	max-ecs-tree-size-ipv4: 4096
	max-ecs-tree-size-ipv6: 4096
`, steer.Addr())
	}
	return fmt.Sprintf(`server:
	interface: 127.0.0.1
	port: %d
	do-ip6: no
	do-daemonize: no
	username: ""
	chroot: ""
	pidfile: ""
	directory: %q
	use-syslog: no
	logfile: ""
	verbosity: 1
	num-threads: 1
	so-reuseport: no
	so-rcvbuf: 4m
	access-control: 127.0.0.0/8 allow
	outgoing-interface: %s
	do-not-query-localhost: no
	qname-minimisation: no
	prefetch: no
	serve-expired: no
	cache-min-ttl: 0
	module-config: %q
%sremote-control:
	control-enable: no
stub-zone:
	name: "example.com."
	stub-addr: %s@%d
`, port, dir, out, mods, extra, steer.Addr(), steer.Port())
}

// proc is a started child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func startProc(dir, name string, args ...string) (*proc, error) {
	lf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: lf, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process (TERM, KILL after 5 s).
func (p *proc) stop() {
	if p == nil {
		return
	}
	if !p.exited() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.log.Close()
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log.Name())
	s := string(b)
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// startUnbound writes the site's configuration into dir/name, checks it
// with unbound-checkconf and starts Unbound in the foreground; it returns
// once Unbound answers the record.
func startUnbound(dir, name string, port int, out netip.Addr, ecs bool, steer netip.AddrPort) (*proc, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(d, "unbound.conf")
	if err := os.WriteFile(conf, []byte(unboundConf(d, port, out, ecs, steer)), 0o644); err != nil {
		return nil, err
	}
	if b, err := exec.Command("unbound-checkconf", conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("unbound-checkconf %s: %v\n%s", conf, err, b)
	}
	p, err := startProc(d, name, "unbound", "-d", "-c", conf)
	if err != nil {
		return nil, err
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	deadline := time.Now().Add(20 * time.Second)
	c := &dns.Client{Timeout: time.Second}
	for {
		if p.exited() {
			return nil, fmt.Errorf("%s exited at start:\n%s", name, p.tail())
		}
		// A name outside the steered record, so that no cache entry of
		// the measured record is made before the run.
		m := new(dns.Msg)
		m.SetQuestion("ns1.example.com.", dns.TypeA)
		if r, _, err := c.Exchange(m, addr.String()); err == nil && r.Rcode == dns.RcodeSuccess {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s did not answer within 20s:\n%s", name, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// steerNode is steer running in this process (internal/node, as `steer
// serve` runs it).
type steerNode struct {
	n   *node.Node
	api string
	dir string
}

func startSteer(dir string, dnsPort, apiPort, ttl int) (*steerNode, error) {
	if err := os.WriteFile(filepath.Join(dir, "example.com.zone"), []byte(zoneText), 0o644); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "steer.yaml")
	if err := os.WriteFile(cfg, []byte(steerConfig(dnsPort, apiPort, ttl)), 0o644); err != nil {
		return nil, err
	}
	n, err := node.New(node.Options{ConfigPath: cfg, Version: "simcheck"})
	if err != nil {
		return nil, err
	}
	if err := n.Start(context.Background()); err != nil {
		return nil, err
	}
	return &steerNode{n: n, api: fmt.Sprintf("http://127.0.0.1:%d", apiPort), dir: dir}, nil
}

func (s *steerNode) configPath() string { return filepath.Join(s.dir, "steer.yaml") }
func (s *steerNode) queryLog() string   { return filepath.Join(s.dir, "query.log") }

// setPool sets the operator state of one pool of the record through the
// admin API (PUT /v1/records/{name}/pools/{pool}/state).
func (s *steerNode) setPool(pool, state string) error {
	url := s.api + "/v1/records/" + strings.TrimSuffix(recordName, ".") + "/pools/" + pool + "/state"
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(`{"state":"`+state+`"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT %s: %s: %s", url, resp.Status, b)
	}
	return nil
}

// counters scrapes steer's /metrics and returns, for each name asked
// for, the sum of its samples under the name alone and under the name
// with each label set as printed (`name{labels}`).
func (s *steerNode) counters(names ...string) (map[string]float64, error) {
	resp, err := http.Get(s.api + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		series := line[:sp]
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := series
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
		}
		if slices.Contains(names, name) {
			out[name] += v
			if name != series {
				out[series] += v
			}
		}
	}
	return out, sc.Err()
}

func (s *steerNode) stop() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.n.Shutdown(ctx)
}

// ecsSubnets draws n distinct IPv4 /24s that the geo set places in a
// country (real addresses, so that steer's partition gives them real
// scopes); a share naShare of them in North or South America, the rest
// elsewhere, so that the NA/SA rule's boundaries cut the scopes.
func ecsSubnets(g *geo.Set, n int, naShare float64, seed uint64) ([]netip.Prefix, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	seen := map[netip.Prefix]bool{}
	wantNA := int(float64(n)*naShare + 0.5)
	var na, other []netip.Prefix
	for tries := 0; len(na)+len(other) < n; tries++ {
		if tries > 10_000_000 {
			return nil, errors.New("could not draw enough /24s from the geo database")
		}
		v := rng.Uint32()
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), 0})
		if !a.IsGlobalUnicast() || a.IsPrivate() {
			continue
		}
		info, _, err := g.Lookup(a)
		if err != nil || info.Country == "" {
			continue
		}
		p := netip.PrefixFrom(a, 24)
		if seen[p] {
			continue
		}
		isNA := info.Continent == "NA" || info.Continent == "SA"
		switch {
		case isNA && len(na) < wantNA:
			na = append(na, p)
		case !isNA && len(other) < n-wantNA:
			other = append(other, p)
		default:
			continue
		}
		seen[p] = true
	}
	return append(na, other...), nil
}

// lockedFile is a mutex for concurrent writes of a small log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Printf(format string, args ...any) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
