package xfr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/steer-dns/steer/internal/tsig"
)

// Target is a secondary to notify.
type Target struct {
	// Addr is host:port.
	Addr string
	// Key signs the NOTIFY; nil sends it unsigned.
	Key *tsig.Key
	// Source is the local address it is sent from (notify_source); the
	// zero Addr lets the system choose.
	Source netip.Addr
}

// RcodeError is a NOTIFY answered with an rcode other than NOERROR.
type RcodeError struct {
	Rcode     int
	TsigError uint16 // the response's TSIG error, 0 when none
}

func (e *RcodeError) Error() string {
	s := dns.RcodeToString[e.Rcode]
	if s == "" {
		s = fmt.Sprintf("rcode %d", e.Rcode)
	}
	if e.TsigError != 0 {
		s += " (TSIG " + dns.RcodeToString[int(e.TsigError)] + ")"
	}
	return s
}

// notifyInterval is the first retry interval; tests shorten it.
var notifyInterval = time.Second

// Notify sends one NOTIFY for zone with serial soa.Serial to t over UDP
// (RFC 1996: AA set, opcode NOTIFY, question zone SOA IN, the SOA in the
// answer section as §3.7 allows), signed with t.Key, and waits for the
// matching response (same ID, opcode NOTIFY, QR set; its TSIG verified
// when the NOTIFY was signed). Datagrams that do not match are ignored.
// Without a response it retries, up to tries attempts in all (tries < 1
// means 1), the wait doubling from 1 s; ctx bounds the whole. It returns
// nil on NOERROR and otherwise an error naming zone and target that wraps
// an *RcodeError naming the rcode (e.g. "NOTAUTH (TSIG BADKEY)").
func Notify(ctx context.Context, zone string, soa *dns.SOA, t Target, tries int) error {
	if tries < 1 {
		tries = 1
	}
	zone = dns.Fqdn(zone)
	m := new(dns.Msg)
	m.SetNotify(zone)
	a := dns.Copy(soa).(*dns.SOA)
	a.Hdr.Name = zone
	m.Answer = []dns.RR{a}
	var keys tsig.Keyring
	if t.Key != nil {
		keys = tsig.NewKeyring(*t.Key)
	}
	d := &net.Dialer{}
	if t.Source.IsValid() {
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(t.Source, 0))
	}
	c, err := d.DialContext(ctx, "udp", t.Addr)
	if err != nil {
		return fmt.Errorf("xfr: notify %s to %s: %w", zone, t.Addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()

	wait := notifyInterval
	var last error
	var macs []string // a late answer to an earlier attempt is signed over its MAC
	for try := 0; try < tries; try++ {
		if ctx.Err() != nil {
			break
		}
		var b []byte
		var mac string
		if t.Key != nil {
			// Signed afresh each attempt (TsigGenerate takes the TSIG RR
			// off m); the ID stays, as it is the same NOTIFY.
			m.Extra = nil
			m.SetTsig(t.Key.Name, t.Key.Algorithm, 300, time.Now().Unix())
			b, mac, err = dns.TsigGenerateWithProvider(m, keys, "", false)
			macs = append(macs, mac)
		} else {
			b, err = m.Pack()
		}
		if err != nil {
			return fmt.Errorf("xfr: notify %s: %w", zone, err)
		}
		deadline := time.Now().Add(wait)
		if _, err := c.Write(b); err != nil {
			last = err
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(deadline)):
			}
		} else {
			r, rb, err := readNotifyResponse(ctx, c, m.Id, zone, deadline)
			if err == nil {
				if err := checkNotifyResponse(r, rb, keys, macs, t.Key != nil); err != nil {
					return fmt.Errorf("xfr: notify %s to %s: %w", zone, t.Addr, err)
				}
				return nil
			}
			last = err
		}
		wait *= 2
	}
	if ctx.Err() != nil {
		last = ctx.Err()
	}
	return fmt.Errorf("xfr: notify %s to %s: no response: %w", zone, t.Addr, last)
}

// readNotifyResponse reads datagrams until the response to id arrives or
// the deadline passes.
func readNotifyResponse(ctx context.Context, c net.Conn, id uint16, zone string, deadline time.Time) (*dns.Msg, []byte, error) {
	c.SetReadDeadline(deadline)
	if err := ctx.Err(); err != nil {
		// Cancelled before the deadline was set: AfterFunc's wake-up is lost.
		return nil, nil, err
	}
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, err := c.Read(buf)
		if err != nil {
			if ctx.Err() == nil && time.Now().Before(deadline) {
				// Connection refused and the like: keep to the schedule.
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(deadline)):
				}
			}
			return nil, nil, err
		}
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) != nil || r.Id != id || !r.Response || r.Opcode != dns.OpcodeNotify ||
			(len(r.Question) > 0 && !strings.EqualFold(r.Question[0].Name, zone)) {
			continue
		}
		return r, append([]byte(nil), buf[:n]...), nil
	}
}

func checkNotifyResponse(r *dns.Msg, raw []byte, keys tsig.Keyring, macs []string, signed bool) error {
	if r.Rcode != dns.RcodeSuccess {
		e := &RcodeError{Rcode: r.Rcode}
		if t := r.IsTsig(); t != nil {
			e.TsigError = t.Error
		}
		return e
	}
	if signed {
		if r.IsTsig() == nil {
			return errors.New("response not signed")
		}
		var err error
		for i := len(macs) - 1; i >= 0; i-- {
			// TsigVerify rewrites the buffer it is given.
			if err = dns.TsigVerifyWithProvider(append([]byte(nil), raw...), keys, macs[i], false); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("response TSIG: %w", err)
		}
	}
	return nil
}

// Notifier sends NOTIFYs in the background. For each (zone, target) at
// most one NOTIFY is in flight; a Send while one is in flight leaves the
// newest serial pending (replacing an older pending one), sent when the
// current one finishes. A serial not newer (RFC 1982) than the one in
// flight, with nothing pending, is dropped: the NOTIFY in flight covers it. Its zero value is ready to use; it must not be
// copied after first use.
type Notifier struct {
	// Result, when set, is called after each finished Notify (from the
	// sending goroutine) with its error (nil: acknowledged).
	Result func(zone string, t Target, serial uint32, err error)
	// Tries is passed to Notify; 0 means 5.
	Tries int
	// Source, when valid, is the Source of every target sent to
	// (SetSource changes it later).
	Source netip.Addr

	mu     sync.Mutex
	jobs   map[notifyKey]*notifyJob
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
	wg     sync.WaitGroup
}

type notifyKey struct {
	zone, addr, key string
}

type notifyJob struct {
	t       Target
	pending *dns.SOA
	sending uint32 // the serial in flight
}

// Send queues a NOTIFY of soa for zone to each target and returns at once.
// After Close it does nothing.
func (n *Notifier) Send(zone string, soa *dns.SOA, targets []Target) {
	zone = dns.CanonicalName(zone)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if n.jobs == nil {
		n.jobs = map[notifyKey]*notifyJob{}
		n.ctx, n.cancel = context.WithCancel(context.Background())
	}
	for _, t := range targets {
		k := notifyKey{zone: zone, addr: t.Addr}
		if t.Key != nil {
			k.key = t.Key.Name
		}
		if j, ok := n.jobs[k]; ok {
			switch {
			case j.pending != nil:
				if !SerialNewer(j.pending.Serial, soa.Serial) {
					j.pending = soa
				}
			case SerialNewer(soa.Serial, j.sending):
				j.pending = soa
			}
			// Otherwise the NOTIFY in flight already announces it.
			j.t = t
			continue
		}
		j := &notifyJob{t: t, pending: soa}
		n.jobs[k] = j
		n.wg.Add(1)
		go n.run(k, j)
	}
}

func (n *Notifier) run(k notifyKey, j *notifyJob) {
	defer n.wg.Done()
	tries := n.Tries
	if tries == 0 {
		tries = 5
	}
	for {
		n.mu.Lock()
		soa, t := j.pending, j.t
		j.pending = nil
		if soa != nil {
			j.sending = soa.Serial
		}
		if soa == nil || n.ctx.Err() != nil {
			delete(n.jobs, k)
			n.mu.Unlock()
			return
		}
		if n.Source.IsValid() {
			t.Source = n.Source
		}
		n.mu.Unlock()
		err := Notify(n.ctx, k.zone, soa, t, tries)
		if n.Result != nil {
			n.Result(k.zone, t, soa.Serial, err)
		}
	}
}

// SetSource sets Source for the NOTIFYs sent from now on.
func (n *Notifier) SetSource(a netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.Source = a
}

// Close stops sending (a NOTIFY in flight ends with the context's error)
// and waits for the senders to finish.
func (n *Notifier) Close() {
	n.mu.Lock()
	n.closed = true
	if n.cancel != nil {
		n.cancel()
	}
	n.mu.Unlock()
	n.wg.Wait()
}
