// Package dnssec signs a zone's data: it reads BIND dnssec-keygen key
// pairs, makes RRSIGs over RRsets (with validity, back-dated inception and
// per-RRset jitter), says when a signature is due for renewal, and keeps
// the two pieces the query path shares between queries: a lock-free cache
// of signatures made on demand (denial of existence, answer sets health
// made reachable) and a budget that caps how many such signatures a
// second may cost.
//
// It knows nothing of zones, policies or servers: package zone signs its
// RRsets through a Signer, the snapshot pre-signs steered answer sets, and
// the server asks the Budget before signing on a query's behalf.
package dnssec
