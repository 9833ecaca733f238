package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// EtcdConfig says how to reach an etcd cluster.
type EtcdConfig struct {
	// Endpoints are the members' client URLs (https://host:2379) or
	// host:port pairs; all must use the same scheme. Requests are spread
	// over the members the client can reach.
	Endpoints []string
	// DialTimeout bounds authenticating with Username and Password when
	// the store is opened (default 5 s). Without a username, opening
	// does no I/O: an unreachable cluster shows in the first call.
	DialTimeout time.Duration
	// RequestTimeout bounds a call whose context has no deadline
	// (default 5 s).
	RequestTimeout time.Duration
	// KeepAliveTime and KeepAliveTimeout: the client pings a member
	// after KeepAliveTime without traffic and drops the connection
	// (and reconnects, resuming watches) when the ping is not answered
	// within KeepAliveTimeout. Defaults 10 s and 5 s; etcd refuses pings
	// more often than every 5 s unless its --grpc-keepalive-min-time is
	// lowered.
	KeepAliveTime    time.Duration
	KeepAliveTimeout time.Duration
	// CAFile verifies the members' certificates (PEM; default the
	// system roots). CertFile and KeyFile are this node's client
	// certificate and key (PEM), for members that require client
	// certificates. Setting any of them, or an https endpoint, turns TLS
	// on.
	CAFile, CertFile, KeyFile string
	// Username and Password authenticate to etcd's auth system.
	Username, Password string
}

const (
	defaultDialTimeout      = 5 * time.Second
	defaultRequestTimeout   = 5 * time.Second
	defaultKeepAliveTime    = 10 * time.Second
	defaultKeepAliveTimeout = 5 * time.Second
	// reconnectMaxDelay caps gRPC's reconnect backoff (2 minutes by
	// default): a node is back within about half a second of the store's
	// return, so a drain set meanwhile reaches the fleet within a second.
	// An attempt on a stopped or cut member is one refused or unanswered
	// connection, twice a second per member per node.
	reconnectMaxDelay = 500 * time.Millisecond
)

// TLSConfig builds the client TLS configuration from the files named in
// cfg, or nil when TLS is off. Errors name the file at fault.
func (cfg EtcdConfig) TLSConfig() (*tls.Config, error) {
	https := false
	for _, ep := range cfg.Endpoints {
		if strings.HasPrefix(ep, "https://") {
			https = true
		}
	}
	if !https && cfg.CAFile == "" && cfg.CertFile == "" && cfg.KeyFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s: no PEM certificate in it", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case cfg.CertFile != "" && cfg.KeyFile != "":
		if _, err := os.Stat(cfg.CertFile); err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		if _, err := os.Stat(cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("etcd client key: %w", err)
		}
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate %s with key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case cfg.CertFile != "":
		return nil, fmt.Errorf("etcd client certificate %s given without its key file", cfg.CertFile)
	case cfg.KeyFile != "":
		return nil, fmt.Errorf("etcd client key %s given without its certificate file", cfg.KeyFile)
	}
	return tc, nil
}

// etcdStore is the Store on etcd v3.
type etcdStore struct {
	cli     *clientv3.Client
	name    string // "etcd [endpoints]", for errors
	eps     []string
	tls     *tls.Config
	timeout time.Duration
	cfg     EtcdConfig // as opened, for Protection

	mu     sync.Mutex
	closed bool
	leases map[*etcdLease]struct{}
}

// OpenEtcd returns a Store on the etcd cluster cfg names. It checks the
// configuration and the TLS files but, unless cfg has a username, does
// not wait for the cluster: an unreachable cluster makes each call fail
// within its deadline, and the client keeps reconnecting.
func OpenEtcd(cfg EtcdConfig) (Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("fleet: etcd: no endpoints")
	}
	scheme := func(ep string) string {
		if i := strings.Index(ep, "://"); i >= 0 {
			return ep[:i]
		}
		return ""
	}
	for _, ep := range cfg.Endpoints {
		switch s := scheme(ep); s {
		case "", "http", "https":
			if s != scheme(cfg.Endpoints[0]) {
				return nil, fmt.Errorf("fleet: etcd endpoints %v: mixed schemes", cfg.Endpoints)
			}
		default:
			return nil, fmt.Errorf("fleet: etcd endpoint %q: scheme %q, want http or https", ep, s)
		}
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errors.New("fleet: etcd: username and password go together")
	}
	name := "etcd " + strings.Join(cfg.Endpoints, ",")
	tc, err := cfg.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", name, err)
	}
	def := func(d, v time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return v
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          def(cfg.DialTimeout, defaultDialTimeout),
		DialKeepAliveTime:    def(cfg.KeepAliveTime, defaultKeepAliveTime),
		DialKeepAliveTimeout: def(cfg.KeepAliveTimeout, defaultKeepAliveTimeout),
		TLS:                  tc,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zap.NewNop(),
		// Keep requests under etcd's own limit, with room for gRPC.
		MaxCallSendMsgSize: MaxRequestBytes + 64*1024,
		// gRPC's reconnect backoff grows to 2 minutes by default: after a
		// long partition the node would wait that long once the network
		// healed. Capped (reconnectMaxDelay), it is back within about that.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
			MinConnectTimeout: def(cfg.DialTimeout, defaultDialTimeout),
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: connect: %w", name, err)
	}
	return &etcdStore{
		cli:     cli,
		name:    name,
		eps:     cfg.Endpoints,
		tls:     tc,
		timeout: def(cfg.RequestTimeout, defaultRequestTimeout),
		cfg:     cfg,
		leases:  make(map[*etcdLease]struct{}),
	}, nil
}

func (s *etcdStore) errorf(format string, args ...any) error {
	return fmt.Errorf("fleet: %s: "+format, append([]any{s.name}, args...)...)
}

// fail wraps the client's err for what. The client reports a call that
// could not reach any member (refused, TLS rejected) only as a missed
// deadline, so then the endpoints are probed directly and what the probe
// found is added.
func (s *etcdStore) fail(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		if p := s.probe(); p != "" {
			return fmt.Errorf("fleet: %s: %s: %w (%s)", s.name, what, err, p)
		}
	}
	return fmt.Errorf("fleet: %s: %s: %w", s.name, what, err)
}

// probeTimeout bounds the diagnosis of a failed call.
const probeTimeout = time.Second

// probe connects to every endpoint (with TLS if configured) and says
// which cannot be reached and why, or that all could.
func (s *etcdStore) probe() string {
	errs := make([]error, len(s.eps))
	var wg sync.WaitGroup
	for i, ep := range s.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.probeOne(ep)
		}()
	}
	wg.Wait()
	var bad []string
	for i, err := range errs {
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", s.eps[i], err))
		}
	}
	if len(bad) == len(s.eps) {
		return "no member reachable: " + strings.Join(bad, "; ")
	}
	msg := fmt.Sprintf("%d of %d members reachable but the cluster did not answer in time: quorum lost?", len(s.eps)-len(bad), len(s.eps))
	if len(bad) > 0 {
		msg += " unreachable: " + strings.Join(bad, "; ")
	}
	return msg
}

// dialEndpoint opens a TCP connection to the member at ep (a URL or
// host:port) within probeTimeout, and returns its host:port.
func dialEndpoint(ep string) (net.Conn, string, error) {
	host := ep
	if i := strings.Index(ep, "://"); i >= 0 {
		host = ep[i+3:]
	}
	host = strings.TrimSuffix(host, "/")
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	return conn, host, err
}

func (s *etcdStore) probeOne(ep string) error {
	conn, host, err := dialEndpoint(ep)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if s.tls == nil {
		return nil
	}
	tc := s.tls.Clone()
	if tc.ServerName == "" {
		if h, _, err := net.SplitHostPort(host); err == nil {
			tc.ServerName = h
		}
	}
	tconn := tls.Client(conn, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	// With TLS 1.3 a refused client certificate shows only on the
	// first read.
	tconn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := tconn.Read(make([]byte, 1)); err != nil {
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return fmt.Errorf("TLS: %w", err)
		}
	}
	return nil
}

// ctx applies the default timeout to a context without a deadline.
func (s *etcdStore) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

func (s *etcdStore) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// DBStatus asks each endpoint's member for its status (etcd's Status
// call: database size, size in use, alarms).
func (s *etcdStore) DBStatus(ctx context.Context) (DBStatus, error) {
	if s.isClosed() {
		return DBStatus{}, s.errorf("status: %w", ErrClosed)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var st DBStatus
	var errs []error
	answered := false
	for _, ep := range s.eps {
		resp, err := s.cli.Status(ctx, ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		answered = true
		if resp.DbSize > st.Bytes {
			st.Bytes, st.InUse, st.Member = resp.DbSize, resp.DbSizeInUse, ep
		}
		for _, e := range resp.Errors {
			if !slices.Contains(st.Alarms, e) {
				st.Alarms = append(st.Alarms, e)
			}
		}
	}
	if !answered {
		return DBStatus{}, s.fail("status", errors.Join(errs...))
	}
	return st, nil
}

func (s *etcdStore) Get(ctx context.Context, prefix string) ([]KV, int64, error) {
	return s.get(ctx, prefix, "get")
}

func (s *etcdStore) GetStale(ctx context.Context, prefix string) ([]KV, int64, error) {
	return s.get(ctx, prefix, "stale get", clientv3.WithSerializable())
}

func (s *etcdStore) get(ctx context.Context, prefix, what string, opts ...clientv3.OpOption) ([]KV, int64, error) {
	if s.isClosed() {
		return nil, 0, s.errorf("%s prefix %q: %w", what, prefix, ErrClosed)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, prefix, append(opts, clientv3.WithPrefix())...)
	if err != nil {
		return nil, 0, s.fail(fmt.Sprintf("%s prefix %q", what, prefix), err)
	}
	kvs := make([]KV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		kvs[i] = KV{Key: string(kv.Key), Value: kv.Value, Rev: kv.ModRevision, Lease: kv.Lease}
	}
	return kvs, resp.Header.Revision, nil
}

func (s *etcdStore) Txn(ctx context.Context, cmps []Cmp, puts []KV, deletes []string) (bool, int64, error) {
	what := describeTxn(cmps, puts, deletes)
	if err := checkTxn(cmps, puts, deletes); err != nil {
		return false, 0, s.errorf("%s: %w", what, err)
	}
	if s.isClosed() {
		return false, 0, s.errorf("%s: %w", what, ErrClosed)
	}
	ecmps := make([]clientv3.Cmp, len(cmps))
	for i, c := range cmps {
		op := map[CmpOp]string{CmpEqual: "=", CmpLess: "<", CmpGreater: ">"}[c.Op]
		if op == "" {
			return false, 0, s.errorf("%s: compare on %q: unknown operator %d", what, c.Key, c.Op)
		}
		ecmps[i] = clientv3.Compare(clientv3.ModRevision(c.Key), op, c.ModRev)
		if c.Prefix {
			ecmps[i] = ecmps[i].WithPrefix()
		}
	}
	ops := make([]clientv3.Op, 0, len(puts)+len(deletes))
	for _, p := range puts {
		var opts []clientv3.OpOption
		if p.Lease != 0 {
			opts = append(opts, clientv3.WithLease(clientv3.LeaseID(p.Lease)))
		}
		ops = append(ops, clientv3.OpPut(p.Key, string(p.Value), opts...))
	}
	for _, d := range deletes {
		ops = append(ops, clientv3.OpDelete(d))
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(ecmps...).Then(ops...).Commit()
	if err != nil {
		return false, 0, s.fail(what, err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

// describeTxn names a transaction by its first keys, for errors.
func describeTxn(cmps []Cmp, puts []KV, deletes []string) string {
	var keys []string
	for _, p := range puts {
		keys = append(keys, p.Key)
	}
	keys = append(keys, deletes...)
	if len(keys) == 0 {
		for _, c := range cmps {
			keys = append(keys, c.Key)
		}
	}
	more := ""
	if len(keys) > 3 {
		more = fmt.Sprintf(" and %d more", len(keys)-3)
		keys = keys[:3]
	}
	return fmt.Sprintf("txn (%d compares, %d puts, %d deletes) on %q%s", len(cmps), len(puts), len(deletes), keys, more)
}

func (s *etcdStore) Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse {
	out := make(chan WatchResponse, 1)
	if s.isClosed() {
		out <- WatchResponse{Err: s.errorf("watch prefix %q: %w", prefix, ErrClosed)}
		close(out)
		return out
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify()}
	if fromRev > 0 {
		opts = append(opts, clientv3.WithRev(fromRev))
	}
	// Require a leader: a member cut off from the others ends the watch
	// with an error instead of going silent, so the caller can tell.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := s.cli.Watch(wctx, prefix, opts...)
	go func() {
		defer close(out)
		defer cancel()
		send := func(r WatchResponse) bool {
			select {
			case out <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for resp := range wch {
			if resp.CompactRevision != 0 {
				send(WatchResponse{
					Rev: resp.Header.Revision, Compacted: true, CompactRev: resp.CompactRevision,
					Err: s.errorf("watch prefix %q from revision %d: compacted up to %d: %w", prefix, fromRev, resp.CompactRevision, ErrCompacted),
				})
				return
			}
			if err := resp.Err(); err != nil {
				send(WatchResponse{Rev: resp.Header.Revision, Err: s.errorf("watch prefix %q from revision %d: %w", prefix, fromRev, err)})
				return
			}
			r := WatchResponse{Rev: resp.Header.Revision}
			if len(resp.Events) > 0 {
				r.Events = make([]Event, len(resp.Events))
				for i, ev := range resp.Events {
					e := Event{Kind: EventPut, KV: KV{Key: string(ev.Kv.Key), Value: ev.Kv.Value, Rev: ev.Kv.ModRevision, Lease: ev.Kv.Lease}}
					if ev.Type == clientv3.EventTypeDelete {
						e.Kind = EventDelete
						e.KV.Value = nil
					}
					r.Events[i] = e
				}
				// The header may be ahead of the events while the
				// watcher catches up: only the last event's revision
				// is known complete.
				r.Rev = r.Events[len(r.Events)-1].KV.Rev
			}
			if !send(r) {
				return
			}
		}
		if ctx.Err() == nil {
			send(WatchResponse{Err: s.errorf("watch prefix %q from revision %d: %w", prefix, fromRev, ErrClosed)})
		}
	}()
	return out
}

func (s *etcdStore) Grant(ctx context.Context, ttl time.Duration) (Lease, error) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	if secs < 1 {
		return nil, s.errorf("grant lease of %v: TTL under one second", ttl)
	}
	if s.isClosed() {
		return nil, s.errorf("grant lease of %v: %w", ttl, ErrClosed)
	}
	gctx, cancel := s.ctx(ctx)
	defer cancel()
	resp, err := s.cli.Grant(gctx, secs)
	if err != nil {
		return nil, s.fail(fmt.Sprintf("grant lease of %v", ttl), err)
	}
	kactx, stop := context.WithCancel(context.Background())
	ka, err := s.cli.KeepAlive(kactx, resp.ID)
	if err != nil {
		stop()
		return nil, s.errorf("keep lease %x alive: %w", int64(resp.ID), err)
	}
	l := &etcdLease{s: s, id: int64(resp.ID), ttl: time.Duration(resp.TTL) * time.Second, stop: stop, done: make(chan struct{}), ended: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		stop()
		return nil, s.errorf("grant lease of %v: %w", ttl, ErrClosed)
	}
	s.leases[l] = struct{}{}
	s.mu.Unlock()
	go l.run(kactx, ka)
	return l, nil
}

func (s *etcdStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	leases := s.leases
	s.leases = nil
	s.mu.Unlock()
	for l := range leases {
		l.end(nil)
	}
	if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return s.errorf("close: %w", err)
	}
	return nil
}

// etcdLease is a Lease kept alive by the client's keep-alive loop, which
// sends a refresh every TTL/3 and gives up once no refresh has been
// answered for the TTL.
type etcdLease struct {
	s    *etcdStore
	id   int64
	ttl  time.Duration
	stop context.CancelFunc

	once  sync.Once
	done  chan struct{} // closed when the lease ended
	ended chan struct{} // closed when run returned
	err   error
}

func (l *etcdLease) ID() int64          { return l.id }
func (l *etcdLease) TTL() time.Duration { return l.ttl }

func (l *etcdLease) Done() <-chan struct{} { return l.done }

func (l *etcdLease) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

func (l *etcdLease) run(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(l.ended)
	for range ka {
	}
	if ctx.Err() == nil {
		l.end(l.s.errorf("lease %x (TTL %v): keep-alive ended, the store dropped it or was unreachable for the TTL: %w", l.id, l.ttl, ErrLeaseLost))
	}
}

// end marks the lease ended with err (nil: closed) and stops its
// keep-alive.
func (l *etcdLease) end(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
		l.stop()
		l.s.mu.Lock()
		delete(l.s.leases, l)
		l.s.mu.Unlock()
	})
}

func (l *etcdLease) Put(ctx context.Context, key string, value []byte) (int64, error) {
	if err := l.Err(); err != nil {
		return 0, l.s.errorf("put %q under lease %x: %w", key, l.id, ErrLeaseLost)
	}
	_, rev, err := l.s.Txn(ctx, nil, []KV{{Key: key, Value: value, Lease: l.id}}, nil)
	return rev, err
}

func (l *etcdLease) Close(ctx context.Context) error {
	lost := l.Err() != nil
	l.end(nil)
	<-l.ended
	if lost || l.s.isClosed() {
		return nil
	}
	ctx, cancel := l.s.ctx(ctx)
	defer cancel()
	if _, err := l.s.cli.Revoke(ctx, clientv3.LeaseID(l.id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return l.s.errorf("revoke lease %x: %w", l.id, err)
	}
	return nil
}
