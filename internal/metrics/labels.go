package metrics

import "github.com/miekg/dns"

// This file maps a query's rcode and qtype to the small indexes the
// query counters are kept by, and those to their label values.

// rcode indexes: 0..15 are the header rcodes, then BADVERS (16), then other.
const (
	rcodeBadVers = 16
	rcodeOther   = 17
	numRcodes    = 18
)

var rcodeNames = [numRcodes]string{
	"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED",
	"YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH", "NOTZONE", "DSOTYPENI",
	"RCODE12", "RCODE13", "RCODE14", "RCODE15", "BADVERS", "other",
}

// qtype indexes.
const (
	qA = iota
	qAAAA
	qCNAME
	qMX
	qNS
	qSOA
	qTXT
	qSRV
	qCAA
	qPTR
	qHTTPS
	qSVCB
	qDS
	qDNSKEY
	qANY
	qOther
	numQtypes
)

var qtypeNames = [numQtypes]string{
	"A", "AAAA", "CNAME", "MX", "NS", "SOA", "TXT", "SRV", "CAA", "PTR",
	"HTTPS", "SVCB", "DS", "DNSKEY", "ANY", "other",
}

// qtypeTable maps the qtypes below 256 to their index; CAA (257) is the only
// named type above.
var qtypeTable = func() (t [256]uint8) {
	for i := range t {
		t[i] = qOther
	}
	for qt, i := range map[uint16]uint8{
		dns.TypeA: qA, dns.TypeAAAA: qAAAA, dns.TypeCNAME: qCNAME, dns.TypeMX: qMX,
		dns.TypeNS: qNS, dns.TypeSOA: qSOA, dns.TypeTXT: qTXT, dns.TypeSRV: qSRV,
		dns.TypePTR: qPTR, dns.TypeHTTPS: qHTTPS, dns.TypeSVCB: qSVCB, dns.TypeDS: qDS,
		dns.TypeDNSKEY: qDNSKEY, dns.TypeANY: qANY,
	} {
		t[qt] = i
	}
	return t
}()

func qtypeIndex(qtype uint16) int {
	if qtype < 256 {
		return int(qtypeTable[qtype])
	}
	if qtype == dns.TypeCAA {
		return qCAA
	}
	return qOther
}

func rcodeIndex(rcode int) int {
	if uint(rcode) < 16 {
		return rcode
	}
	if rcode == dns.RcodeBadVers {
		return rcodeBadVers
	}
	return rcodeOther
}
