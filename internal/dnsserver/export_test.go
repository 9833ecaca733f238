package dnsserver

import "time"

// SetClock makes the handler read the time from now, for cookies and rate
// limits (tests that compare answers byte for byte need the cookies
// minted in the same second and the buckets filled at the same instant).
// Only tests set it: a running server reads the time once per batch of
// datagrams (Handler.timeAt).
func (h *Handler) SetClock(now func() time.Time) { h.now = now }
