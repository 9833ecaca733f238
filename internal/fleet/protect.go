package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"
)

// Protection is how a store guards what is written to it from whoever can
// reach its members or the network between: whether every connection is
// TLS with the members' certificates verified, and whether the store
// admits authenticated clients only. steer fleet push asks before it
// writes private keys (DNSSEC private keys travel in the bundle): from a
// store without both, anyone who can read it, or the wire, has the keys.
type Protection struct {
	// TLS: every endpoint is reached over TLS, the members' certificates
	// verified (against the CA file, or the system roots). steer never
	// skips that verification.
	TLS bool
	// Auth says how the store authenticates this client, as checked with
	// the store itself: "username and password" (etcd's authentication
	// is enabled) or "client certificate" (every member asks for one); ""
	// when it does not.
	Auth string
	// Missing says what is missing, one sentence each; empty when the
	// store has both.
	Missing []string
}

// OK reports whether the store is TLS and authenticated.
func (p Protection) OK() bool { return len(p.Missing) == 0 }

// Protector is a Store that can say how it is protected.
type Protector interface {
	Protection(ctx context.Context) Protection
}

// ProtectionOf asks s how it is protected; a store that cannot say is
// taken as unprotected.
func ProtectionOf(ctx context.Context, s Store) Protection {
	if p, ok := s.(Protector); ok {
		return p.Protection(ctx)
	}
	return Protection{Missing: []string{"the store cannot say whether it is TLS and authenticated"}}
}

// Protection checks the configuration the store was opened with and asks
// the cluster what the configuration alone cannot tell: a username and
// password protect nothing when etcd's authentication is not enabled
// (etcd then ignores them and serves every client), and a client
// certificate only when the members require one (checked with a TLS
// handshake to each: an etcd started with --client-cert-auth or
// --trusted-ca-file asks for it).
func (s *etcdStore) Protection(ctx context.Context) Protection {
	var p Protection
	plain := false
	for _, ep := range s.eps {
		if strings.HasPrefix(ep, "http://") {
			plain = true
		}
	}
	switch {
	case s.tls == nil:
		p.Missing = append(p.Missing, fmt.Sprintf("no TLS: the endpoints (%s) are plain HTTP, so the keys would cross the network in the clear (give https:// endpoints, with fleet.etcd.tls.ca for a private CA)", strings.Join(s.eps, ", ")))
	case plain:
		p.Missing = append(p.Missing, fmt.Sprintf("no TLS: the endpoints (%s) are http://, so the keys would cross the network in the clear, whatever TLS files are set (give https:// endpoints)", strings.Join(s.eps, ", ")))
	default:
		p.TLS = true
	}
	certs := s.tls != nil && len(s.tls.Certificates) > 0
	var enabled bool
	var aerr error
	if s.cfg.Username != "" {
		cctx, cancel := s.ctx(ctx)
		resp, err := s.cli.AuthStatus(cctx)
		cancel()
		if err != nil {
			aerr = s.fail("asking whether authentication is enabled", err)
		} else {
			enabled = resp.Enabled
		}
	}
	var noCert []string
	var perr error
	if certs && p.TLS {
		noCert, perr = s.certRequired()
	}
	switch {
	case s.cfg.Username != "" && enabled:
		p.Auth = "username and password"
	case certs && p.TLS && perr == nil && len(noCert) == 0:
		p.Auth = "client certificate"
	case s.cfg.Username != "" && aerr != nil:
		p.Missing = append(p.Missing, fmt.Sprintf("cannot tell whether etcd's authentication is enabled: %v", aerr))
	case s.cfg.Username != "":
		p.Missing = append(p.Missing, "no authentication: etcd's authentication is not enabled (etcdctl auth enable), so it ignores the username and password and serves anyone who reaches it")
	case certs && !p.TLS:
		p.Missing = append(p.Missing, "no authentication: the client certificate is not sent over http:// endpoints, and no username and password is set")
	case certs && perr != nil:
		p.Missing = append(p.Missing, fmt.Sprintf("cannot tell whether the members require a client certificate: %v", perr))
	case certs && p.TLS:
		p.Missing = append(p.Missing, fmt.Sprintf("no authentication: the members at %s do not require a client certificate (start etcd with --client-cert-auth and --trusted-ca-file), so anyone who reaches them can read and write", strings.Join(noCert, ", ")))
	default:
		p.Missing = append(p.Missing, "no authentication: neither a username and password nor a client certificate is set (fleet.etcd.username and password_file, or fleet.etcd.tls.cert and key, of the file given with --fleet), so anyone who reaches etcd can read and write")
	}
	return p
}

// certRequired shakes hands with every endpoint without sending a
// certificate up front and returns those that do not ask for one.
func (s *etcdStore) certRequired() (notAsking []string, err error) {
	asked := make([]bool, len(s.eps))
	errs := make([]error, len(s.eps))
	var wg sync.WaitGroup
	for i, ep := range s.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			asked[i], errs[i] = s.asksForCert(ep)
		}()
	}
	wg.Wait()
	for i, ep := range s.eps {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", ep, errs[i])
		}
		if !asked[i] {
			notAsking = append(notAsking, ep)
		}
	}
	return notAsking, nil
}

// asksForCert reports whether the member at ep asks for a client
// certificate in the TLS handshake (it is then given the client's own).
func (s *etcdStore) asksForCert(ep string) (bool, error) {
	conn, host, err := dialEndpoint(ep)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	tc := s.tls.Clone()
	if tc.ServerName == "" {
		if h, _, err := net.SplitHostPort(host); err == nil {
			tc.ServerName = h
		}
	}
	own := tc.Certificates[0]
	tc.Certificates = nil
	asked := false
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked = true
		return &own, nil
	}
	tconn := tls.Client(conn, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		return false, fmt.Errorf("TLS: %w", err)
	}
	return asked, nil
}
