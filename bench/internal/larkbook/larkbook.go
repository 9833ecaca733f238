// Package larkbook holds what the benchmark's tools share: the Larkbook
// benchmark policy, its answers, and the query encoding.
package larkbook

import (
	"net"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// The benchmark's answers.
const (
	Mumbai    = "203.0.113.10"
	Frankfurt = "198.51.100.20"
	Virginia  = "192.0.2.30"
	Static    = "192.0.2.80"
)

// SouthAsia are the countries steered to Mumbai.
var SouthAsia = []string{"IN", "LK", "BD", "NP"}

// Expected is the benchmark policy, bench/lib/larkbook-records.yaml
// (deterministic: no canary split):
//
//	country IN, LK, BD or NP -> Mumbai
//	continent EU             -> Frankfurt
//	continent NA or SA       -> Virginia
//	anything else, not found -> Virginia
func Expected(country, continent string) string {
	switch {
	case slices.Contains(SouthAsia, country):
		return Mumbai
	case continent == "EU":
		return Frankfurt
	case continent == "NA" || continent == "SA":
		return Virginia
	}
	return Virginia
}

// Query is the wire form of an A query for name with an EDNS Client Subnet
// option for subnet, RD clear, EDNS buffer 1232.
func Query(name string, subnet netip.Prefix, id uint16) ([]byte, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = id
	m.RecursionDesired = false
	m.SetEdns0(1232, false)
	opt := m.IsEdns0()
	family := uint16(1)
	if subnet.Addr().Is6() {
		family = 2
	}
	opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{
		Code:          dns.EDNS0SUBNET,
		Family:        family,
		SourceNetmask: uint8(subnet.Bits()),
		Address:       net.IP(subnet.Masked().Addr().AsSlice()),
	})
	return m.Pack()
}
