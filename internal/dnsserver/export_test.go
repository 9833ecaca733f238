package dnsserver

import (
	"net/netip"
	"time"
)

// SetClock makes the handler read the time from now, for cookies and rate
// limits (tests that compare answers byte for byte need the cookies
// minted in the same second and the buckets filled at the same instant).
// Only tests set it: a running server reads the time once per batch of
// datagrams (Handler.timeAt).
func (h *Handler) SetClock(now func() time.Time) { h.now = now }

// Batch is a UDP reader's batch (batch), for benchmarks that answer
// queries as the batched reader does.
type Batch = batch

// StartBatch begins a batch received now, counting into h's metrics.
func (h *Handler) StartBatch(b *Batch) { b.start(h.metrics) }

// FlushBatch adds b's counts to the metrics and the rate limiter's.
func (b *Batch) FlushBatch() { b.flush() }

// HandleBatched answers req as one datagram of b.
func (h *Handler) HandleBatched(req []byte, from netip.Addr, buf []byte, b *Batch) []byte {
	return h.handleBatched(req, from, buf, b)
}

// Holds reports whether b still points at a snapshot or what is in one.
func (b *Batch) Holds() bool {
	m := &b.memo
	return m.snap != nil || m.z != nil || m.node != nil || m.rec != nil || b.rrl != nil
}
