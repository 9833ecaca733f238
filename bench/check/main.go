// Command check asks one server the benchmark's questions and compares the
// answers with the policy: static.example.com A must be 192.0.2.80, and
// (unless -static-only) shop.example.com A with the ECS option of each
// subnet in sample.tsv (written by bench/querygen) must be that line's
// expected address and nothing else.
//
// It prints one summary line ("ok 201/201" or "WRONG 12/201 ...") and the
// first mismatches, and exits 1 when any answer is wrong or missing.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/steer-dns/steer/bench/internal/larkbook"
)

func main() {
	server := flag.String("server", "127.0.0.1:5301", "server address host:port")
	sample := flag.String("sample", "sample.tsv", "sample file from querygen")
	staticOnly := flag.Bool("static-only", false, "check only the static name (for a server without geo)")
	timeout := flag.Duration("timeout", 2*time.Second, "per-query timeout")
	flag.Parse()

	c := &dns.Client{Net: "udp", Timeout: *timeout}
	total, wrong := 0, 0
	var notes []string
	note := func(s string) {
		wrong++
		if len(notes) < 10 {
			notes = append(notes, s)
		}
	}

	// static name, plain query without EDNS as dnsperf sends it
	total++
	if got, err := ask(c, *server, "static.example.com.", netip.Prefix{}); err != nil {
		note("static.example.com: " + err.Error())
	} else if got != larkbook.Static {
		note(fmt.Sprintf("static.example.com: got %q, want %s", got, larkbook.Static))
	}

	if !*staticOnly {
		f, err := os.Open(*sample)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Split(line, "\t")
			if len(fields) < 5 {
				fmt.Fprintf(os.Stderr, "bad sample line %q\n", line)
				os.Exit(2)
			}
			p, err := netip.ParsePrefix(fields[0])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			want := fields[4]
			total++
			got, err := ask(c, *server, "shop.example.com.", p)
			if err != nil {
				note(fmt.Sprintf("%s (%s/%s): %v", p, fields[1], fields[2], err))
			} else if got != want {
				note(fmt.Sprintf("%s (%s/%s): got %q, want %s", p, fields[1], fields[2], got, want))
			}
		}
		f.Close()
	}
	if wrong == 0 {
		fmt.Printf("ok %d/%d\n", total, total)
		return
	}
	fmt.Printf("WRONG %d/%d\n", wrong, total)
	for _, n := range notes {
		fmt.Println("  " + n)
	}
	os.Exit(1)
}

// ask sends an A query (with ECS for subnet when it is valid) and returns
// the answer's A addresses joined by commas, or an error for a failed
// exchange or a non-NOERROR rcode.
func ask(c *dns.Client, server, name string, subnet netip.Prefix) (string, error) {
	var m *dns.Msg
	if subnet.IsValid() {
		wire, err := larkbook.Query(name, subnet, dns.Id())
		if err != nil {
			return "", err
		}
		m = new(dns.Msg)
		if err := m.Unpack(wire); err != nil {
			return "", err
		}
	} else {
		m = new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.RecursionDesired = false
	}
	var r *dns.Msg
	var err error
	for try := 0; try < 3; try++ {
		r, _, err = c.Exchange(m, server)
		if err == nil {
			break
		}
	}
	if err != nil {
		return "", err
	}
	if r.Rcode != dns.RcodeSuccess {
		return "", fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	var as []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			as = append(as, a.A.String())
		}
	}
	return strings.Join(as, ","), nil
}
