// Package dnssec signs a zone's data: it reads BIND dnssec-keygen key
// pairs, makes RRSIGs over RRsets (with validity, back-dated inception and
// per-RRset jitter), says when a signature is due for renewal, and keeps
// the two pieces the query path shares between queries: a lock-free cache
// of signatures made on demand (denial of existence, answer sets health
// made reachable) and a budget that caps how many such signatures a
// second may cost.
//
// Signatures are made by building the signed data of RFC 4034 directly
// (sign.go: 5 allocations instead of miekg/dns's 28 for Ed25519, 61
// instead of 92 for ECDSA P-256, most of them crypto/ecdsa's; ECDSA
// signatures are deterministic, RFC 6979, a fifth less CPU; miekg's
// RRSIG.Verify is the tests' oracle). An Entry
// carries each RRSIG's RDATA in wire form for the fast path (NewEntry,
// Signer.SignEntry). denial.go builds the NSECs of denial signed online:
// compact answers (RFC 9824, NXNAME) keyed in the cache by DenialKey, and
// minimally covering NSECs from the RFC 4471 predecessor and successor
// of a name (the next closer name of a wildcard answer).
//
// It knows nothing of zones, policies or servers: package zone signs its
// RRsets through a Signer, the snapshot pre-signs steered answer sets, and
// the server asks the Budget before signing on a query's behalf.
package dnssec
