// Package keyroll keeps a signed zone's key plan: every key the zone has
// had, has or will have, each with its role and its timeline (RFC 7583
// §3: published, active, retired, removed), and drives the automatic
// pre-publication ZSK rollover of RFC 6781 §4.1.1.1 with the timings of
// RFC 7583 §3.2.
//
// A plan is pure data plus wall-clock times. Plan.At(now) says, for any
// instant, which keys sign, which DNSKEYs are only published (a
// successor not yet active, a predecessor retired but still in caches)
// and when the next change is due. Plan.Next(now, timings, gen) is the
// one step that changes a plan: it schedules the rollover (generates the
// active ZSK's successor with gen and sets every time of the swap at
// once) and forgets what has been removed. Since every event is a time
// written in the plan, every node that evaluates the same plan switches
// keys at the same instant without talking to the others: one node (or
// one process, per restart) steps the plan and stores it; the others only
// read it and call At.
//
// The RFC 7583 §3.2 ZSK pre-publication timeline, with key N active and
// N+1 its successor (Lzsk the ZSK lifetime):
//
//	Ipub      = Dprp + TTLkey            (Timings.Ipub)
//	Iret      = Dsgn + Dprp + TTLsig     (Timings.Iret)
//	Tpub(N+1) = Tact(N) + Lzsk - Ipub    (or now, when that has passed)
//	Tact(N+1) = Tret(N) = max(Tpub(N+1) + Ipub, Tact(N) + Lzsk)
//	Trem(N)   = Tret(N) + Iret
//
// so a validator that holds the DNSKEY RRset from before Tpub(N+1) has
// let it expire before the first signature by N+1 is served, and one that
// holds a signature by N has let it expire before N leaves the DNSKEY
// RRset.
//
// Persistence: Load and Save keep a plan as JSON (mode 0600: it holds
// private keys) in the state directory, at File(stateDir, zone).
package keyroll
