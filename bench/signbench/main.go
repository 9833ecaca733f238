// Command signbench is the Go side of bench/dnssec.sh, the DNSSEC
// benchmark: steer signed beside steer unsigned, gdnsd (unsigned) and Knot
// with mod-onlinesign on the Larkbook zone. Subcommands:
//
//	signbench dofile -in steered.bin -out steered-do.bin
//	    copies a dnsperf -B file (2-byte length, message), setting the DO
//	    bit on every message (the EDNS buffer and the ECS option stay).
//	signbench static -out static-do.bin [-n 1000]
//	    writes static.example.com A queries with EDNS 1232 and DO, in the
//	    same framing.
//	signbench check -server ADDR -sample sample.tsv -zone example.com.
//	    the pre-load check of a signed server: the static name and shop
//	    with each sample subnet's ECS option, with DO; every answer must be
//	    the policy's and carry an RRSIG that verifies with the zone's
//	    DNSKEY (itself signed by a SEP key of the set), and a random
//	    nonexistent name must be denied with signed records. Prints
//	    "ok N/N validated" or "WRONG n/N" and the first problems.
//	signbench flood -server ADDR -src 127.7.7.7 -qps 50000 -duration 20s
//	    a random-subdomain flood with DO from one (spoofed) source address:
//	    <16 hex>.example.com A, EDNS 1232, DO; prints one JSON line: sent,
//	    answered, TC, rcodes, answers carrying an RRSIG.
//	signbench resolve -server ADDR -qps 50 -duration 20s
//	    a client of a validating resolver (Unbound in front of the server
//	    under test): random nonexistent names, shop and static, RD set;
//	    an answer counts as validated when AD=1 with the rcode expected
//	    (NXDOMAIN or NOERROR with no answer for a nonexistent name).
//	    Prints one JSON line.
//	signbench wait -server ADDR -name N -want ADDR [-do] [-ecs P] [-limit 600s]
//	    polls every 10 ms until N A (with the ECS option) answers want (and
//	    with -do, carries an RRSIG); prints the seconds since -since (unix
//	    nanoseconds, the script's exec time) or since it started.
//	signbench summary -dir RESULTS
//	    the tables of bench/dnssec.sh (see summary.go).
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/bench/internal/larkbook"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: signbench dofile|static|check|flood|resolve|wait|summary ...")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"dofile": doFile, "static": staticFile, "check": check, "flood": flood,
		"resolve": resolve, "wait": wait, "summary": summaryCmd,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown subcommand", os.Args[1])
		os.Exit(2)
	}
	if err := f(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "signbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// ---- query files ----------------------------------------------------------

func doFile(args []string) error {
	fs := flag.NewFlagSet("dofile", flag.ExitOnError)
	in := fs.String("in", "", "dnsperf -B input")
	out := fs.String("out", "", "output")
	fs.Parse(args)
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	w, err := os.Create(*out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	n := 0
	for len(b) > 0 {
		if len(b) < 2 {
			return errors.New("truncated length")
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l {
			return errors.New("truncated message")
		}
		m := new(dns.Msg)
		if err := m.Unpack(b[2 : 2+l]); err != nil {
			return fmt.Errorf("message %d: %v", n, err)
		}
		opt := m.IsEdns0()
		if opt == nil {
			m.SetEdns0(1232, true)
		} else {
			opt.SetDo()
		}
		if err := writeFramed(bw, m); err != nil {
			return err
		}
		b = b[2+l:]
		n++
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return w.Close()
}

func staticFile(args []string) error {
	fs := flag.NewFlagSet("static", flag.ExitOnError)
	out := fs.String("out", "", "output")
	n := fs.Int("n", 1000, "queries")
	name := fs.String("name", "static.example.com.", "name")
	fs.Parse(args)
	w, err := os.Create(*out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for i := 0; i < *n; i++ {
		m := new(dns.Msg)
		m.SetQuestion(*name, dns.TypeA)
		m.RecursionDesired = false
		m.Id = uint16(i)
		m.SetEdns0(1232, true)
		if err := writeFramed(bw, m); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return w.Close()
}

func writeFramed(w io.Writer, m *dns.Msg) error {
	wire, err := m.Pack()
	if err != nil {
		return err
	}
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(len(wire)))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err = w.Write(wire)
	return err
}

// ---- validation -------------------------------------------------------------

// exchange asks over UDP and retries over TCP on TC, as a resolver does.
func exchange(server string, m *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	var r *dns.Msg
	var err error
	for try := 0; try < 3; try++ {
		r, _, err = (&dns.Client{Net: "udp", Timeout: timeout, UDPSize: 1232}).Exchange(m, server)
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if r.Truncated {
		r, _, err = (&dns.Client{Net: "tcp", Timeout: timeout}).Exchange(m, server)
	}
	return r, err
}

// keyset fetches the zone's DNSKEY set and checks it is signed by a SEP
// key of the set.
func keyset(server, zone string, timeout time.Duration) ([]*dns.DNSKEY, error) {
	m := new(dns.Msg)
	m.SetQuestion(zone, dns.TypeDNSKEY)
	m.RecursionDesired = false
	m.SetEdns0(1232, true)
	r, err := exchange(server, m, timeout)
	if err != nil {
		return nil, err
	}
	var keys []*dns.DNSKEY
	var set []dns.RR
	for _, rr := range r.Answer {
		if k, ok := rr.(*dns.DNSKEY); ok {
			keys = append(keys, k)
			set = append(set, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no DNSKEY at %s (rcode %s)", zone, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		sig, ok := rr.(*dns.RRSIG)
		if !ok || sig.TypeCovered != dns.TypeDNSKEY {
			continue
		}
		for _, k := range keys {
			if k.Flags&dns.SEP != 0 && k.KeyTag() == sig.KeyTag && sig.Verify(k, set) == nil && sig.ValidityPeriod(time.Now()) {
				return keys, nil
			}
		}
	}
	return nil, errors.New("the DNSKEY set has no valid signature by a SEP key of the set")
}

// verifySection checks that every RRset of rrs (but RRSIGs) carries an
// RRSIG that verifies with one of keys; it returns how many RRsets.
func verifySection(rrs []dns.RR, keys []*dns.DNSKEY) (int, error) {
	type key struct {
		name string
		t    uint16
	}
	sets := map[key][]dns.RR{}
	sigs := map[key][]*dns.RRSIG{}
	var order []key
	for _, rr := range rrs {
		h := rr.Header()
		if sig, ok := rr.(*dns.RRSIG); ok {
			k := key{strings.ToLower(h.Name), sig.TypeCovered}
			sigs[k] = append(sigs[k], sig)
			continue
		}
		if h.Rrtype == dns.TypeOPT {
			continue
		}
		k := key{strings.ToLower(h.Name), h.Rrtype}
		if _, ok := sets[k]; !ok {
			order = append(order, k)
		}
		sets[k] = append(sets[k], rr)
	}
	for _, k := range order {
		ok := false
		var last error = errors.New("no RRSIG")
		for _, sig := range sigs[k] {
			for _, dk := range keys {
				if dk.KeyTag() != sig.KeyTag || dk.Algorithm != sig.Algorithm {
					continue
				}
				if err := sig.Verify(dk, sets[k]); err != nil {
					last = err
					continue
				}
				if !sig.ValidityPeriod(time.Now()) {
					last = errors.New("RRSIG outside its validity period")
					continue
				}
				ok = true
			}
		}
		if !ok {
			return 0, fmt.Errorf("%s %s: %v", k.name, dns.TypeToString[k.t], last)
		}
	}
	return len(order), nil
}

func randomLabel() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:5301", "server")
	sample := fs.String("sample", "sample.tsv", "querygen's sample")
	zone := fs.String("zone", "example.com.", "zone")
	timeout := fs.Duration("timeout", 2*time.Second, "per-query timeout")
	fs.Parse(args)

	keys, err := keyset(*server, dns.Fqdn(*zone), *timeout)
	if err != nil {
		fmt.Printf("WRONG DNSKEY: %v\n", err)
		os.Exit(1)
	}
	total, wrong := 0, 0
	var notes []string
	note := func(s string) {
		wrong++
		if len(notes) < 10 {
			notes = append(notes, s)
		}
	}
	ask := func(name string, subnet netip.Prefix, want string) {
		total++
		m := new(dns.Msg)
		if subnet.IsValid() {
			wire, err := larkbook.Query(name, subnet, dns.Id())
			if err == nil {
				err = m.Unpack(wire)
			}
			if err != nil {
				note(err.Error())
				return
			}
			m.IsEdns0().SetDo()
		} else {
			m.SetQuestion(name, dns.TypeA)
			m.RecursionDesired = false
			m.SetEdns0(1232, true)
		}
		r, err := exchange(*server, m, *timeout)
		if err != nil {
			note(fmt.Sprintf("%s %s: %v", name, subnet, err))
			return
		}
		var as []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				as = append(as, a.A.String())
			}
		}
		if want == "" { // a nonexistent name: NXDOMAIN or NODATA, signed
			if len(as) > 0 || (r.Rcode != dns.RcodeNameError && r.Rcode != dns.RcodeSuccess) {
				note(fmt.Sprintf("%s: rcode %s, answer %v", name, dns.RcodeToString[r.Rcode], as))
				return
			}
			n, err := verifySection(r.Ns, keys)
			if err != nil || n == 0 {
				note(fmt.Sprintf("%s: denial not signed (%d RRsets): %v", name, n, err))
			}
			return
		}
		if got := strings.Join(as, ","); got != want {
			note(fmt.Sprintf("%s %s: got %q, want %s", name, subnet, got, want))
			return
		}
		if _, err := verifySection(r.Answer, keys); err != nil {
			note(fmt.Sprintf("%s %s: %v", name, subnet, err))
		}
	}
	ask("static.example.com.", netip.Prefix{}, larkbook.Static)
	ask(randomLabel()+".example.com.", netip.Prefix{}, "")
	f, err := os.Open(*sample)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 5 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		p, err := netip.ParsePrefix(fields[0])
		if err != nil {
			return err
		}
		ask("shop.example.com.", p, fields[4])
	}
	if wrong == 0 {
		fmt.Printf("ok %d/%d validated\n", total, total)
		return nil
	}
	fmt.Printf("WRONG %d/%d\n", wrong, total)
	for _, n := range notes {
		fmt.Println("  " + n)
	}
	os.Exit(1)
	return nil
}

// ---- the flood --------------------------------------------------------------

type floodResult struct {
	Class      string  `json:"class"`
	Label      string  `json:"label"`
	Source     string  `json:"source"`
	Seconds    float64 `json:"seconds"`
	Sent       int64   `json:"sent"`
	SendQPS    float64 `json:"send_qps"`
	Answered   int64   `json:"answered"`
	TC         int64   `json:"tc"`
	NXDomain   int64   `json:"nxdomain"`
	NoError    int64   `json:"noerror"`
	Other      int64   `json:"other_rcode"`
	Signed     int64   `json:"signed"` // answers (not TC) carrying an RRSIG
	SendErrors int64   `json:"send_errors"`
}

func flood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:5301", "server")
	src := fs.String("src", "127.7.7.7", "the one (spoofed) source address")
	qps := fs.Float64("qps", 50000, "queries per second")
	dur := fs.Duration("duration", 20*time.Second, "how long")
	zone := fs.String("zone", "example.com.", "zone")
	label := fs.String("label", "", "server name in the JSON line")
	fs.Parse(args)
	raddr, err := net.ResolveUDPAddr("udp", *server)
	if err != nil {
		return err
	}
	conn, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(*src)}, raddr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadBuffer(8 << 20)
	conn.SetWriteBuffer(8 << 20)
	res := floodResult{Class: "flood", Label: *label, Source: *src}
	var answered, tc, nx, noerr, other, signed atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // responses
		defer wg.Done()
		buf := make([]byte, 65535)
		for {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := conn.Read(buf)
			if err != nil {
				select {
				case <-done:
					return
				default:
					continue
				}
			}
			if n < 12 {
				continue
			}
			answered.Add(1)
			flags := binary.BigEndian.Uint16(buf[2:])
			if flags&(1<<9) != 0 {
				tc.Add(1)
				continue
			}
			switch flags & 0xf {
			case dns.RcodeNameError:
				nx.Add(1)
			case dns.RcodeSuccess:
				noerr.Add(1)
			default:
				other.Add(1)
			}
			var m dns.Msg
			if m.Unpack(buf[:n]) == nil {
				for _, rr := range append(m.Answer, m.Ns...) {
					if rr.Header().Rrtype == dns.TypeRRSIG {
						signed.Add(1)
						break
					}
				}
			}
		}
	}()
	// a template query; the ID and the first label change per query
	m := new(dns.Msg)
	m.SetQuestion("0000000000000000."+dns.Fqdn(*zone), dns.TypeA)
	m.RecursionDesired = false
	m.SetEdns0(1232, true)
	tmpl, err := m.Pack()
	if err != nil {
		return err
	}
	const labelAt = 12 + 1 // header, then the first label's length byte
	start := time.Now()
	var sent, sendErr int64
	var rnd [8]byte
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for now := start; now.Sub(start) < *dur; now = <-tick.C {
		due := int64(now.Sub(start).Seconds() * *qps)
		for ; sent < due; sent++ {
			rand.Read(rnd[:])
			hex.Encode(tmpl[labelAt:labelAt+16], rnd[:])
			binary.BigEndian.PutUint16(tmpl, uint16(sent))
			if _, err := conn.Write(tmpl); err != nil {
				sendErr++
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	time.Sleep(500 * time.Millisecond) // the last responses
	close(done)
	wg.Wait()
	res.Sent, res.SendErrors = sent, sendErr
	res.SendQPS = float64(sent) / res.Seconds
	res.Answered, res.TC, res.NXDomain, res.NoError, res.Other, res.Signed =
		answered.Load(), tc.Load(), nx.Load(), noerr.Load(), other.Load(), signed.Load()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// ---- the resolver's client --------------------------------------------------------

type resolveResult struct {
	Class        string  `json:"class"`
	Label        string  `json:"label"`
	Seconds      float64 `json:"seconds"`
	Asked        int64   `json:"asked"`
	Validated    int64   `json:"validated"` // AD=1 and the expected answer
	ServFail     int64   `json:"servfail"`
	NoAD         int64   `json:"no_ad"`
	Wrong        int64   `json:"wrong"`
	Timeout      int64   `json:"timeout"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	FirstProblem string  `json:"first_problem,omitempty"`
}

func resolve(args []string) error {
	fs := flag.NewFlagSet("resolve", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:5399", "the validating resolver")
	qps := fs.Float64("qps", 50, "queries per second")
	dur := fs.Duration("duration", 20*time.Second, "how long")
	zone := fs.String("zone", "example.com.", "zone")
	label := fs.String("label", "", "server name in the JSON line")
	timeout := fs.Duration("timeout", 5*time.Second, "per-query timeout")
	fs.Parse(args)
	res := resolveResult{Class: "resolver", Label: *label}
	var mu sync.Mutex
	var lat []float64
	problem := func(s string) {
		mu.Lock()
		if res.FirstProblem == "" {
			res.FirstProblem = s
		}
		mu.Unlock()
	}
	var asked, validated, servfail, noAD, wrong, timeouts atomic.Int64
	var wg sync.WaitGroup
	one := func(i int64) {
		defer wg.Done()
		var name, want string
		switch i % 4 {
		case 0:
			name, want = "shop."+*zone, larkbook.Virginia // the resolver sends no ECS: 127.0.0.1 is in no country
		case 1:
			name, want = "static."+*zone, larkbook.Static
		default:
			name = randomLabel() + "." + *zone // nonexistent
		}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		m.RecursionDesired = true
		m.SetEdns0(1232, true)
		t0 := time.Now()
		r, _, err := (&dns.Client{Net: "udp", Timeout: *timeout, UDPSize: 1232}).Exchange(m, *server)
		if err == nil && r.Truncated {
			r, _, err = (&dns.Client{Net: "tcp", Timeout: *timeout}).Exchange(m, *server)
		}
		asked.Add(1)
		if err != nil {
			timeouts.Add(1)
			problem(name + ": " + err.Error())
			return
		}
		mu.Lock()
		lat = append(lat, time.Since(t0).Seconds()*1000)
		mu.Unlock()
		switch {
		case r.Rcode == dns.RcodeServerFailure:
			servfail.Add(1)
			problem(name + ": SERVFAIL")
			return
		case !r.AuthenticatedData:
			noAD.Add(1)
			problem(fmt.Sprintf("%s: rcode %s without AD", name, dns.RcodeToString[r.Rcode]))
			return
		}
		var as []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				as = append(as, a.A.String())
			}
		}
		ok := false
		switch want {
		case "":
			ok = len(as) == 0 && (r.Rcode == dns.RcodeNameError || r.Rcode == dns.RcodeSuccess)
		default:
			ok = r.Rcode == dns.RcodeSuccess && strings.Join(as, ",") == want
		}
		if !ok {
			wrong.Add(1)
			problem(fmt.Sprintf("%s: rcode %s answer %v", name, dns.RcodeToString[r.Rcode], as))
			return
		}
		validated.Add(1)
	}
	start := time.Now()
	var n int64
	tick := time.NewTicker(5 * time.Millisecond)
	for now := start; now.Sub(start) < *dur; now = <-tick.C {
		due := int64(now.Sub(start).Seconds() * *qps)
		for ; n < due; n++ {
			wg.Add(1)
			go one(n)
		}
	}
	tick.Stop()
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Asked, res.Validated, res.ServFail, res.NoAD, res.Wrong, res.Timeout =
		asked.Load(), validated.Load(), servfail.Load(), noAD.Load(), wrong.Load(), timeouts.Load()
	res.P50ms, res.P99ms = percentile(lat, 50), percentile(lat, 99)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// ---- waiting for the first answer -----------------------------------------------

func wait(args []string) error {
	fs := flag.NewFlagSet("wait", flag.ExitOnError)
	server := fs.String("server", "127.0.0.1:5301", "server")
	name := fs.String("name", "", "name to ask (type A)")
	want := fs.String("want", "", "the address expected")
	ecs := fs.String("ecs", "49.36.0.0/24", "ECS subnet sent (empty: none)")
	do := fs.Bool("do", false, "set DO and require an RRSIG over the answer")
	since := fs.Int64("since", 0, "start time, unix nanoseconds (0: now)")
	limit := fs.Duration("limit", 600*time.Second, "give up after")
	pid := fs.Int("pid", 0, "give up when this process is gone")
	fs.Parse(args)
	start := time.Now()
	if *since > 0 {
		start = time.Unix(0, *since)
	}
	var m *dns.Msg
	if *ecs != "" {
		p, err := netip.ParsePrefix(*ecs)
		if err != nil {
			return err
		}
		wire, err := larkbook.Query(dns.Fqdn(*name), p, 1)
		if err != nil {
			return err
		}
		m = new(dns.Msg)
		if err := m.Unpack(wire); err != nil {
			return err
		}
	} else {
		m = new(dns.Msg)
		m.SetQuestion(dns.Fqdn(*name), dns.TypeA)
		m.RecursionDesired = false
		m.SetEdns0(1232, false)
	}
	if *do {
		m.IsEdns0().SetDo()
	}
	c := &dns.Client{Net: "udp", Timeout: 100 * time.Millisecond, UDPSize: 1232}
	for {
		r, _, err := c.Exchange(m, *server)
		if err == nil && r.Truncated {
			r, _, err = (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(m, *server)
		}
		if err == nil && answers(r, *want, *do) {
			fmt.Printf("%.3f\n", time.Since(start).Seconds())
			return nil
		}
		if time.Since(start) > *limit {
			return fmt.Errorf("no right answer within %v", *limit)
		}
		if *pid > 0 {
			if _, err := os.Stat("/proc/" + strconv.Itoa(*pid)); err != nil {
				return fmt.Errorf("process %d is gone", *pid)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func answers(r *dns.Msg, want string, do bool) bool {
	got, signed := false, !do
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			got = got || rr.A.String() == want
		case *dns.RRSIG:
			signed = signed || rr.TypeCovered == dns.TypeA
		}
	}
	return got && signed
}

// percentile is the nearest-rank percentile of xs (NaN when empty).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	k := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[max(0, min(k, len(v)-1))]
}
