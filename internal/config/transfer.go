package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steer-dns/steer/internal/diag"
)

// TSIGKey is one key of the tsig section. The secret lives in a file of
// the form BIND's tsig-keygen writes (key "name" { algorithm ...; secret
// "..."; };), which Knot, NSD and BIND read too, so one file serves every
// server of a transfer. Package snapshot reads and validates it.
type TSIGKey struct {
	// Algorithm is hmac-sha256 (default), hmac-sha384, hmac-sha512,
	// hmac-sha224 or hmac-sha1; it must match the file's.
	Algorithm string `yaml:"algorithm"`
	// SecretFile is the tsig-keygen file holding the key of this name.
	SecretFile string `yaml:"secret_file"`
}

// Secondary is a server that may transfer a zone out of steer (AXFR and
// IXFR), and that is sent a NOTIFY after each new serial.
type Secondary struct {
	// Address is the secondary's IP address, or a prefix of them, that
	// transfer requests must come from.
	Address string `yaml:"address"`
	// TSIG is the key its requests must be signed with; the address and
	// the key are both required.
	TSIG string `yaml:"tsig"`
	// Notify is where NOTIFYs go: host:port, a port alone (":5300"), or
	// "none". Default: Address port 53 when Address is one address, none
	// for a prefix.
	Notify string `yaml:"notify"`
}

// Transfers is the transfers section: how zones are transferred in
// (every secondary zone) and where NOTIFYs leave from.
type Transfers struct {
	// TransfersIn is how many transfers in run at once (BIND's
	// transfers-in); the others wait their turn. Default 10.
	TransfersIn int `yaml:"transfers_in"`
	// IdleTimeoutIn is how long a transfer in waits for each message
	// (and for the connection). Default 30s.
	IdleTimeoutIn Duration `yaml:"idle_timeout_in"`
	// MaxTransferTimeIn bounds one transfer in whole (BIND's
	// max-transfer-time-in). Default 120m.
	MaxTransferTimeIn Duration `yaml:"max_transfer_time_in"`
	// TransferSource is the local IP address SOA queries and transfers
	// in are made from; NotifySource that of the NOTIFYs sent. Default:
	// the system's choice. An anycast node sets its unicast address, so
	// that primaries and secondaries see (and their ACLs match) the node
	// itself rather than the shared service address.
	TransferSource string `yaml:"transfer_source"`
	NotifySource   string `yaml:"notify_source"`
}

// Defaults and limits of the transfer keys.
const (
	DefaultIXFRJournal       = 20
	MaxIXFRJournal           = 10000
	DefaultTSIGAlgo          = "hmac-sha256"
	DefaultTransfersIn       = 10
	MaxTransfersIn           = 1000
	DefaultIdleTimeoutIn     = Duration(30 * time.Second)
	DefaultMaxTransferTimeIn = Duration(120 * time.Minute)
)

// SourceAddrs returns transfer_source and notify_source as addresses (the
// zero Addr when unset; checkTransfers rejected any other value).
func (t *Transfers) SourceAddrs() (transfer, notify netip.Addr) {
	transfer, _ = netip.ParseAddr(t.TransferSource)
	notify, _ = netip.ParseAddr(t.NotifySource)
	return transfer.Unmap(), notify.Unmap()
}

func (t *Transfers) applyDefaults() {
	if t.TransfersIn == 0 {
		t.TransfersIn = DefaultTransfersIn
	}
	if t.IdleTimeoutIn == 0 {
		t.IdleTimeoutIn = DefaultIdleTimeoutIn
	}
	if t.MaxTransferTimeIn == 0 {
		t.MaxTransferTimeIn = DefaultMaxTransferTimeIn
	}
}

// checkTransfers reports each bad key of the transfers section at its
// line.
func (c *Config) checkTransfers(probs *diag.Problems) {
	t := &c.Transfers
	bad := func(key, format string, args ...any) {
		line := c.Line("transfers." + key)
		if line == 0 {
			line = c.Line("transfers")
		}
		probs.Add(c.File, line, "transfers.%s: %s", key, fmt.Sprintf(format, args...))
	}
	if t.TransfersIn < 1 || t.TransfersIn > MaxTransfersIn {
		bad("transfers_in", "%d is not between 1 and %d", t.TransfersIn, MaxTransfersIn)
	}
	if t.IdleTimeoutIn < 0 {
		bad("idle_timeout_in", "must be positive")
	}
	if t.MaxTransferTimeIn < 0 {
		bad("max_transfer_time_in", "must be positive")
	}
	if t.IdleTimeoutIn > t.MaxTransferTimeIn && t.MaxTransferTimeIn > 0 {
		bad("idle_timeout_in", "%s is longer than max_transfer_time_in (%s)",
			time.Duration(t.IdleTimeoutIn), time.Duration(t.MaxTransferTimeIn))
	}
	for _, kv := range [][2]string{{"transfer_source", t.TransferSource}, {"notify_source", t.NotifySource}} {
		key, v := kv[0], kv[1]
		if v == "" {
			continue
		}
		a, err := netip.ParseAddr(v)
		switch {
		case err != nil:
			bad(key, "%q is not an IP address (the local address to send from, without a port)", v)
		case a.Unmap().IsUnspecified() || a.IsMulticast():
			bad(key, "%s cannot be a source address: name one of this host's unicast addresses", v)
		case a.Zone() != "":
			bad(key, "%s: a zone index is not supported", v)
		}
	}
}

// Secondary reports whether the zone is transferred in from primaries.
func (z *Zone) Secondary() bool { return len(z.Primaries) > 0 }

// Journal returns how many serial changes the zone keeps for IXFR.
func (z *Zone) Journal() int {
	if z.IXFRJournal == nil {
		return DefaultIXFRJournal
	}
	return *z.IXFRJournal
}

// Prefix returns the addresses the secondary's requests may come from
// (checked by checkTransfer: always valid in a loaded configuration).
func (s *Secondary) Prefix() netip.Prefix {
	if p, err := netip.ParsePrefix(s.Address); err == nil {
		return p.Masked()
	}
	a, _ := netip.ParseAddr(s.Address)
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen())
}

// NotifyAddr returns where the secondary is notified ("" for nowhere).
func (s *Secondary) NotifyAddr() string {
	switch {
	case s.Notify == "none":
		return ""
	case s.Notify == "":
		if a, err := netip.ParseAddr(s.Address); err == nil {
			return netip.AddrPortFrom(a.Unmap(), 53).String()
		}
		return ""
	case strings.HasPrefix(s.Notify, ":"):
		a := s.Prefix().Addr()
		port, _ := strconv.Atoi(s.Notify[1:])
		return netip.AddrPortFrom(a, uint16(port)).String()
	}
	return s.Notify
}

// PrimaryAddr returns a primaries entry as host:port (port 53 when left
// out), or an error saying what is wrong with it.
func PrimaryAddr(s string) (string, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 53).String(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return "", fmt.Errorf("%q is not an IP address or IP:port (write IPv6 with a port as [2001:db8::1]:53)", s)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), nil
}

func (c *Config) applyTransferDefaults() {
	c.Transfers.applyDefaults()
	for name, k := range c.TSIG {
		if k.Algorithm == "" {
			k.Algorithm = DefaultTSIGAlgo
			c.TSIG[name] = k
		}
	}
}

// checkTransfer checks the transfer keys of zones[i].
func (c *Config) checkTransfer(probs *diag.Problems, i int) {
	z := &c.Zones[i]
	at := func(key string) int {
		// A key left out has no line: the nearest enclosing one that has.
		for {
			if l := c.Line(fmt.Sprintf("zones[%d]%s", i, key)); l != 0 || key == "" {
				return l
			}
			key = key[:max(strings.LastIndexByte(key, '.'), 0)]
		}
	}
	bad := func(key, format string, args ...any) {
		probs.Add(c.File, at(key), "zones: %s: %s", z.Origin, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for j, p := range z.Primaries {
		key := fmt.Sprintf(".primaries[%d]", j)
		a, err := PrimaryAddr(p)
		switch {
		case err != nil:
			bad(key, "primary %v", err)
		case seen[a]:
			bad(key, "primary %s is listed twice", a)
		}
		seen[a] = true
	}
	if z.TSIG != "" {
		if !z.Secondary() {
			bad(".tsig", "tsig names the key of transfers from primaries, and the zone has none (a secondary's key goes in its secondaries entry)")
		} else if _, ok := c.TSIG[z.TSIG]; !ok {
			bad(".tsig", "no key %q in the tsig section%s", z.TSIG, c.keyNames())
		}
	}
	if n := z.IXFRJournal; n != nil && (*n < 0 || *n > MaxIXFRJournal) {
		bad(".ixfr_journal", "ixfr_journal: %d is not between 0 and %d", *n, MaxIXFRJournal)
	}
	for j := range z.Secondaries {
		s := &z.Secondaries[j]
		key := fmt.Sprintf(".secondaries[%d]", j)
		_, perr := netip.ParsePrefix(s.Address)
		_, aerr := netip.ParseAddr(s.Address)
		if perr != nil && aerr != nil {
			bad(key+".address", "secondary address %q is not an IP address or prefix", s.Address)
			continue
		}
		switch {
		case s.TSIG == "":
			bad(key+".tsig", "secondary %s has no tsig key: a transfer out needs both the address and a key (RFC 8945); name one of the tsig section", s.Address)
		default:
			if _, ok := c.TSIG[s.TSIG]; !ok {
				bad(key+".tsig", "no key %q in the tsig section%s", s.TSIG, c.keyNames())
			}
		}
		switch n := s.Notify; {
		case n == "" || n == "none":
		case strings.HasPrefix(n, ":"):
			if p, err := strconv.Atoi(n[1:]); err != nil || p < 1 || p > 65535 {
				bad(key+".notify", "%q is not a port", n)
			} else if aerr != nil {
				bad(key+".notify", "a port alone needs address to be one address, not the prefix %s", s.Address)
			}
		default:
			host, port, err := net.SplitHostPort(n)
			_, herr := netip.ParseAddr(host)
			p, perr := strconv.Atoi(port)
			if err != nil || herr != nil || perr != nil || p < 1 || p > 65535 {
				bad(key+".notify", "%q is not IP:port, :port or none", n)
			}
		}
	}
}

// keyNames lists the tsig section's keys for a message.
func (c *Config) keyNames() string {
	if len(c.TSIG) == 0 {
		return " (it is empty)"
	}
	names := make([]string, 0, len(c.TSIG))
	for n := range c.TSIG {
		names = append(names, n)
	}
	slices.Sort(names)
	return " (it has " + strings.Join(names, ", ") + ")"
}

func (c *Config) checkTSIG(probs *diag.Problems) {
	for name, k := range c.TSIG {
		if k.SecretFile == "" {
			probs.Add(c.File, c.Line("tsig."+name), "tsig: %s has no secret_file (make one with: tsig-keygen -a %s %s > %s.key)", name, DefaultTSIGAlgo, name, name)
		}
	}
}
