package dnssec

import (
	"hash/maphash"
	"strings"

	"github.com/miekg/dns"
)

// sumSeed keys the answer-set digests of this process: the pre-signed
// tables and the query path compute them alike.
var sumSeed = maphash.MakeSeed()

// RdataSum is the digest of one record's RDATA in wire form (4 bytes for
// an A record, 16 for AAAA, a name's uncompressed lower-case wire form for
// CNAME). The digest of an RRset is the wrapping sum of its records'
// RdataSums, so it does not depend on their order and the fast path can
// add them up as it writes them.
func RdataSum(rdata []byte) uint64 {
	h := maphash.Bytes(sumSeed, rdata)
	return h | 1 // never 0: an RRset's sum is 0 only when empty
}

// SetSum is the digest of the RRset rrs as the query path computes it
// from the records it writes: the sum of each record's RdataSum. Only
// A, AAAA and CNAME records are summed (the types steered answers have);
// others add 0.
func SetSum(rrs []dns.RR) uint64 {
	var sum uint64
	var buf [256]byte
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.A:
			sum += RdataSum(rr.A.To4())
		case *dns.AAAA:
			sum += RdataSum(rr.AAAA.To16())
		case *dns.CNAME:
			n, err := dns.PackDomainName(strings.ToLower(dns.Fqdn(rr.Target)), buf[:], 0, nil, false)
			if err == nil {
				sum += RdataSum(buf[:n])
			}
		}
	}
	return sum
}
