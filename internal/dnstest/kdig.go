package dnstest

import (
	"bufio"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/qtype"
)

// ParseKdig turns kdig's default text output back into a dns.Msg: the
// header (status and flags lines), the EDNS pseudosection, the question and
// the three record sections. It fails on any line it does not understand,
// so an unexpected EDNS option or section is noticed.
func ParseKdig(t testing.TB, out string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	section := ""
	var opt *dns.OPT
	var counts [4]int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, ";; ->>HEADER<<-"):
			// ;; ->>HEADER<<- opcode: QUERY; status: NOERROR; id: 26844
			f := kdigFields(line[len(";; ->>HEADER<<-"):])
			op, ok := dns.StringToOpcode[f["opcode"]]
			if !ok {
				t.Fatalf("kdig: opcode %q", f["opcode"])
			}
			m.Opcode = op
			rc, ok := dns.StringToRcode[f["status"]]
			if f["status"] == "BADVERS" { // miekg/dns names 16 BADSIG
				rc, ok = dns.RcodeBadVers, true
			}
			if !ok {
				t.Fatalf("kdig: status %q", f["status"])
			}
			m.Rcode = rc
			id, err := strconv.Atoi(f["id"])
			if err != nil {
				t.Fatalf("kdig: id %q", f["id"])
			}
			m.Id = uint16(id)
		case strings.HasPrefix(line, ";; Flags:"):
			// ;; Flags: qr aa rd; QUERY: 1; ANSWER: 1; AUTHORITY: 0; ADDITIONAL: 0
			flags, rest, _ := strings.Cut(line[len(";; Flags:"):], ";")
			for _, fl := range strings.Fields(flags) {
				switch fl {
				case "qr":
					m.Response = true
				case "aa":
					m.Authoritative = true
				case "tc":
					m.Truncated = true
				case "rd":
					m.RecursionDesired = true
				case "ra":
					m.RecursionAvailable = true
				case "z":
					m.Zero = true
				case "ad":
					m.AuthenticatedData = true
				case "cd":
					m.CheckingDisabled = true
				default:
					t.Fatalf("kdig: flag %q", fl)
				}
			}
			f := kdigFields(rest)
			for i, k := range []string{"QUERY", "ANSWER", "AUTHORITY", "ADDITIONAL"} {
				n, err := strconv.Atoi(f[k])
				if err != nil {
					t.Fatalf("kdig: %s count %q", k, f[k])
				}
				counts[i] = n
			}
		case line == ";; EDNS PSEUDOSECTION:":
			section = "edns"
			opt = &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		case line == ";; QUESTION SECTION:":
			section = "question"
		case line == ";; ANSWER SECTION:":
			section = "answer"
		case line == ";; AUTHORITY SECTION:":
			section = "authority"
		case line == ";; ADDITIONAL SECTION:":
			section = "additional"
		case strings.HasPrefix(line, ";; Received "), strings.HasPrefix(line, ";; Time "), strings.HasPrefix(line, ";; From "):
			section = ""
		case section == "edns":
			parseKdigEDNS(t, line, opt)
		case section == "question":
			// ;; example.com.        		IN	SOA
			f := strings.Fields(strings.TrimPrefix(line, ";;"))
			if len(f) != 3 {
				t.Fatalf("kdig: question line %q", line)
			}
			cl, ok := class(f[1])
			ty, err := qtype.Parse(f[2])
			if !ok || err != nil {
				t.Fatalf("kdig: question line %q", line)
			}
			m.Question = append(m.Question, dns.Question{Name: f[0], Qclass: cl, Qtype: ty})
		case section == "answer" || section == "authority" || section == "additional":
			rr, err := dns.NewRR(line)
			if err != nil || rr == nil {
				t.Fatalf("kdig: record %q: %v", line, err)
			}
			switch section {
			case "answer":
				m.Answer = append(m.Answer, rr)
			case "authority":
				m.Ns = append(m.Ns, rr)
			default:
				m.Extra = append(m.Extra, rr)
			}
		default:
			t.Fatalf("kdig: unexpected line %q in\n%s", line, out)
		}
	}
	if opt != nil {
		m.Extra = append(m.Extra, opt)
	}
	got := [4]int{len(m.Question), len(m.Answer), len(m.Ns), len(m.Extra)}
	if got != counts {
		t.Fatalf("kdig: counts %v in the flags line, %v parsed:\n%s", counts, got, out)
	}
	if !m.Response {
		t.Fatalf("kdig printed no response:\n%s", out)
	}
	return m
}

// class reads a class mnemonic or its RFC 3597 generic form (CLASSnnn).
func class(s string) (uint16, bool) {
	if v, ok := dns.StringToClass[s]; ok {
		return v, true
	}
	if n, ok := strings.CutPrefix(s, "CLASS"); ok {
		v, err := strconv.ParseUint(n, 10, 16)
		return uint16(v), err == nil
	}
	return 0, false
}

// kdigFields splits "a: 1; b: 2" into a map.
func kdigFields(s string) map[string]string {
	f := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(kv, ":")
		if ok {
			f[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return f
}

// parseKdigEDNS reads one line of the EDNS pseudosection into opt.
func parseKdigEDNS(t testing.TB, line string, opt *dns.OPT) {
	t.Helper()
	switch {
	case strings.HasPrefix(line, ";; Version:"):
		// ;; Version: 0; flags: do; UDP size: 1232 B; ext-rcode: NOERROR
		f := kdigFields(strings.TrimPrefix(line, ";;"))
		v, err := strconv.Atoi(f["Version"])
		if err != nil {
			t.Fatalf("kdig: %q", line)
		}
		opt.SetVersion(uint8(v))
		for _, fl := range strings.Fields(f["flags"]) {
			switch fl {
			case "do":
				opt.SetDo()
			default:
				t.Fatalf("kdig: EDNS flag %q", fl)
			}
		}
		size, err := strconv.Atoi(strings.TrimSuffix(f["UDP size"], " B"))
		if err != nil {
			t.Fatalf("kdig: %q", line)
		}
		opt.SetUDPSize(uint16(size))
		// ext-rcode is already folded into the status line.
	case strings.HasPrefix(line, ";; NSID:"):
		// ;; NSID: 73746565722D74657374 "steer-test"
		f := strings.Fields(strings.TrimPrefix(line, ";; NSID:"))
		if len(f) == 0 {
			t.Fatalf("kdig: %q", line)
		}
		b, err := hex.DecodeString(f[0])
		if err != nil {
			t.Fatalf("kdig: %q: %v", line, err)
		}
		opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: hex.EncodeToString(b)})
	case strings.HasPrefix(line, ";; CLIENT-SUBNET:"):
		// ;; CLIENT-SUBNET: 192.0.2.0/24/0 (address/source/scope)
		v := strings.TrimSpace(strings.TrimPrefix(line, ";; CLIENT-SUBNET:"))
		i := strings.LastIndexByte(v, '/')
		if i < 0 {
			t.Fatalf("kdig: %q", line)
		}
		pfx, err := netip.ParsePrefix(v[:i])
		scope, serr := strconv.ParseUint(v[i+1:], 10, 8)
		if err != nil || serr != nil {
			t.Fatalf("kdig: %q", line)
		}
		family := uint16(1)
		if pfx.Addr().Is6() {
			family = 2
		}
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: family,
			SourceNetmask: uint8(pfx.Bits()), SourceScope: uint8(scope), Address: pfx.Addr().AsSlice()})
	default:
		t.Fatalf("kdig: unexpected EDNS line %q", line)
	}
}
