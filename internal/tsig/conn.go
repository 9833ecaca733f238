package tsig

import (
	"encoding/binary"
	"errors"
	"net"

	"github.com/miekg/dns"
)

// connWriter is a dns.ResponseWriter over a TCP connection steer's own
// server reads requests from. It signs the way miekg's server does: the
// first signed message over the request MAC, each later one over the
// previous message's MAC (timers only once TsigTimersOnly(true)).
type connWriter struct {
	c          net.Conn
	keys       Keyring
	status     error
	mac        string // the MAC the next signed message is chained to
	timersOnly bool
}

// NewConnWriter returns a dns.ResponseWriter that writes length-prefixed
// messages on c (a TCP connection), for a request whose raw bytes are req.
// It unpacks req; when req carries a TSIG RR it verifies it with the key of
// that name in keys, under that key's algorithm only (TsigStatus reports
// the result: nil when it verified, dns.ErrSecret for an unknown key, an
// *AlgorithmError for another algorithm, the verification error
// otherwise), and signs every message written with a TSIG RR set
// (m.IsTsig() != nil) as miekg's server does: the first over the request
// MAC, later ones over the previous MAC with timers only once
// TsigTimersOnly(true) was called. A message whose TSIG names a key not in
// keys is written only when its TSIG error is BADKEY or BADSIG (which
// are sent unsigned, RFC 8945 §5.3.2); otherwise WriteMsg fails with
// dns.ErrSecret.
func NewConnWriter(c net.Conn, req []byte, keys Keyring) (dns.ResponseWriter, *dns.Msg, error) {
	m := new(dns.Msg)
	if err := m.Unpack(req); err != nil {
		return nil, nil, err
	}
	w := &connWriter{c: c, keys: keys}
	if t := m.IsTsig(); t != nil {
		w.status = dns.TsigVerifyWithProvider(req, keys, "", false)
		w.mac = t.MAC
	}
	return w, m, nil
}

func (w *connWriter) LocalAddr() net.Addr  { return w.c.LocalAddr() }
func (w *connWriter) RemoteAddr() net.Addr { return w.c.RemoteAddr() }
func (w *connWriter) Close() error         { return w.c.Close() }
func (w *connWriter) TsigStatus() error    { return w.status }
func (w *connWriter) TsigTimersOnly(b bool) {
	w.timersOnly = b
}

// Hijack is a no-op: the connection is the caller's already.
func (w *connWriter) Hijack() {}

func (w *connWriter) WriteMsg(m *dns.Msg) error {
	if t := m.IsTsig(); t != nil {
		_, ok := w.keys[dns.CanonicalName(t.Hdr.Name)]
		if !ok && t.Error != dns.RcodeBadKey && t.Error != dns.RcodeBadSig {
			return dns.ErrSecret
		}
		// With BADKEY/BADSIG TsigGenerate does not sign: no key needed.
		b, mac, err := dns.TsigGenerateWithProvider(m, w.keys, w.mac, w.timersOnly)
		if err != nil {
			return err
		}
		if mac != "" {
			w.mac = mac
		}
		_, err = w.Write(b)
		return err
	}
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Write writes b as one length-prefixed message.
func (w *connWriter) Write(b []byte) (int, error) {
	if len(b) > dns.MaxMsgSize {
		return 0, errors.New("tsig: message too large")
	}
	buf := make([]byte, 2+len(b))
	binary.BigEndian.PutUint16(buf, uint16(len(b)))
	copy(buf[2:], b)
	n, err := w.c.Write(buf)
	if n >= 2 {
		n -= 2
	} else {
		n = 0
	}
	return n, err
}
