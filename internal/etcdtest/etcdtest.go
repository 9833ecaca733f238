// Package etcdtest runs etcd clusters in-process for tests: N embedded
// members (go.etcd.io/etcd/server/v3/embed) on loopback ports, each of
// which can be stopped and restarted; compaction on demand; cuttable TCP
// bridges to put between a client and a member; and a throwaway CA with
// server and client certificates for TLS tests. Everything a test starts
// is stopped at its cleanup, and every wait is bounded.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/steer-dns/steer/internal/dnstest"
)

// ReadyTimeout bounds waiting for a cluster, or a restarted member, to
// serve.
const ReadyTimeout = 15 * time.Second

// Options shape a cluster. The zero value is one plain member.
type Options struct {
	// Members is the number of members (default 1).
	Members int
	// TLS, if set, serves the client port over TLS with TLS.ServerCert
	// and TLS.ServerKey; with ClientCertAuth, clients must present a
	// certificate signed by TLS.CA (without it, none is asked for).
	// Peers talk plain HTTP.
	TLS            *TLSFiles
	ClientCertAuth bool
}

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	opts    Options
	token   string
	members []*Member
}

// Member is one etcd member of a Cluster.
type Member struct {
	c         *Cluster
	name, dir string
	clientURL url.URL
	peerURL   url.URL

	mu sync.Mutex
	e  *embed.Etcd
}

var clusterSeq atomic.Int64

// Start starts a cluster and waits until every member serves (at most
// ReadyTimeout). It fails the test if the cluster does not come up; a
// port taken between choosing and binding it is retried with new ports.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Members <= 0 {
		opts.Members = 1
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var c *Cluster
		c, err = start(t, opts)
		if err == nil {
			t.Cleanup(c.stopAll)
			return c
		}
		if !addrInUse(err) {
			break
		}
	}
	t.Fatalf("etcdtest: start %d members: %v", opts.Members, err)
	return nil
}

func start(t testing.TB, opts Options) (*Cluster, error) {
	c := &Cluster{t: t, opts: opts, token: fmt.Sprintf("etcdtest-%d-%d", os.Getpid(), clusterSeq.Add(1))}
	ports := dnstest.FreePorts(t, 2*opts.Members)
	scheme := "http"
	if opts.TLS != nil {
		scheme = "https"
	}
	var initial []string
	base := t.TempDir()
	for i := 0; i < opts.Members; i++ {
		m := &Member{
			c:         c,
			name:      fmt.Sprintf("m%d", i),
			clientURL: url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		m.dir = filepath.Join(base, m.name)
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	// A member of a new cluster serves only once a quorum has formed:
	// start them all at once, then wait.
	errs := make(chan error, len(c.members))
	for _, m := range c.members {
		go func() {
			e, err := embed.StartEtcd(m.config(strings.Join(initial, ","), embed.ClusterStateFlagNew))
			if err == nil {
				m.mu.Lock()
				m.e = e
				m.mu.Unlock()
			}
			errs <- err
		}()
	}
	var first error
	for range c.members {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = c.waitReady(c.members...)
	}
	if first != nil {
		c.stopAll()
		return nil, first
	}
	return c, nil
}

// config is member m's embed configuration.
func (m *Member) config(initialCluster, state string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.InitialCluster = initialCluster
	cfg.InitialClusterToken = m.c.token
	cfg.ClusterState = state
	cfg.UnsafeNoFsync = true
	// bcrypt's least cost (4, not 10): with authentication on
	// (EnableAuth) every client's login hashes the password, which
	// under the race detector took more than the 5 s a client waits.
	cfg.BcryptCost = 4
	cfg.AutoCompactionRetention = "0" // tests compact by hand
	cfg.EnableGRPCGateway = false
	// Let test clients ping often to notice a cut link quickly.
	cfg.GRPCKeepAliveMinTime = 500 * time.Millisecond
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(quietLogger())
	if tf := m.c.opts.TLS; tf != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile:       tf.ServerCert,
			KeyFile:        tf.ServerKey,
			ClientCertAuth: m.c.opts.ClientCertAuth,
		}
		// etcd asks every client for a certificate when it has a
		// trusted CA, whatever ClientCertAuth says: without it, a
		// member serves TLS to any client.
		if m.c.opts.ClientCertAuth {
			cfg.ClientTLSInfo.TrustedCAFile = tf.CA
		}
	}
	return cfg
}

// quietLogger logs errors only, to stderr, less the ones every member
// logs when it is stopped.
func quietLogger() *zap.Logger {
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(quietCore{zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.ErrorLevel)})
}

type quietCore struct{ zapcore.Core }

func (q quietCore) With(fs []zapcore.Field) zapcore.Core { return quietCore{q.Core.With(fs)} }

func (q quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, "setting up serving from embedded etcd failed") {
		return ce
	}
	return q.Core.Check(e, ce)
}

// waitReady waits for members to serve, at most ReadyTimeout in all.
func (c *Cluster) waitReady(ms ...*Member) error {
	deadline := time.NewTimer(ReadyTimeout)
	defer deadline.Stop()
	for _, m := range ms {
		m.mu.Lock()
		e := m.e
		m.mu.Unlock()
		if e == nil {
			return fmt.Errorf("member %s is not running", m.name)
		}
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			return fmt.Errorf("member %s: %w", m.name, err)
		case <-deadline.C:
			return fmt.Errorf("members not ready after %v (%s first)", ReadyTimeout, m.name)
		}
	}
	return nil
}

// stopAll stops every running member: the followers at once, then the
// leader, which then has no one to hand leadership to (a leader stopped
// while its followers stop too waits seconds for the transfer).
func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	var leaders []*Member
	for _, m := range c.members {
		m.mu.Lock()
		e := m.e
		m.mu.Unlock()
		if e != nil && e.Server.Leader() == e.Server.MemberID() {
			leaders = append(leaders, m)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Stop()
		}()
	}
	wg.Wait()
	for _, m := range leaders {
		m.Stop()
	}
}

// Endpoints are the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Members are the cluster's members, in order.
func (c *Cluster) Members() []*Member { return c.members }

// Member is member i.
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// running is some running member's server.
func (c *Cluster) running() *embed.Etcd {
	for _, m := range c.members {
		m.mu.Lock()
		e := m.e
		m.mu.Unlock()
		if e != nil {
			return e
		}
	}
	return nil
}

// Rev is the current revision as a running member knows it.
func (c *Cluster) Rev() int64 {
	e := c.running()
	if e == nil {
		c.t.Fatalf("etcdtest: no member running")
	}
	return e.Server.KV().Rev()
}

// Compact compacts the cluster's history up to rev (physically: the
// revisions below rev are gone when it returns), through a running
// member. It fails the test if the compaction fails.
func (c *Cluster) Compact(rev int64) {
	c.t.Helper()
	e := c.running()
	if e == nil {
		c.t.Fatalf("etcdtest: compact to %d: no member running", rev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Server.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true}); err != nil {
		c.t.Fatalf("etcdtest: compact to %d: %v", rev, err)
	}
}

// EnableAuth turns etcd's authentication on, with one user, root, of the
// given password and the root role: from then on the cluster serves only
// clients that authenticate as root (by that password, or by a client
// certificate whose common name is root). It fails the test if a step
// fails.
func (c *Cluster) EnableAuth(password string) {
	c.t.Helper()
	e := c.running()
	if e == nil {
		c.t.Fatalf("etcdtest: enable auth: no member running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Server.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: password}); err != nil {
		c.t.Fatalf("etcdtest: add user root: %v", err)
	}
	if _, err := e.Server.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}); err != nil {
		c.t.Fatalf("etcdtest: grant root the root role: %v", err)
	}
	if _, err := e.Server.AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		c.t.Fatalf("etcdtest: enable auth: %v", err)
	}
}

// Name is the member's name (m0, m1, …).
func (m *Member) Name() string { return m.name }

// Endpoint is the member's client URL.
func (m *Member) Endpoint() string { return m.clientURL.String() }

// Addr is the member's client address, host:port (to put a Bridge in
// front of).
func (m *Member) Addr() string { return m.clientURL.Host }

// Running reports whether the member is started.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e != nil
}

// Stop stops the member, keeping its data for Restart. Stopping a
// stopped member does nothing.
func (m *Member) Stop() {
	m.mu.Lock()
	e := m.e
	m.e = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member again on its data and ports and waits
// for it to serve (which needs a quorum of the cluster running). It
// fails the test if the member does not come back.
func (m *Member) Restart() {
	m.c.t.Helper()
	m.mu.Lock()
	running := m.e != nil
	m.mu.Unlock()
	if running {
		return
	}
	var initial []string
	for _, o := range m.c.members {
		initial = append(initial, o.name+"="+o.peerURL.String())
	}
	var err error
	// The port may linger a moment after Stop.
	for attempt := 0; attempt < 20; attempt++ {
		var e *embed.Etcd
		e, err = embed.StartEtcd(m.config(strings.Join(initial, ","), embed.ClusterStateFlagExisting))
		if err == nil {
			m.mu.Lock()
			m.e = e
			m.mu.Unlock()
			break
		}
		if !addrInUse(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil {
		err = m.c.waitReady(m)
	}
	if err != nil {
		m.c.t.Fatalf("etcdtest: restart %s: %v", m.name, err)
	}
}

// addrInUse tells a port taken by someone else.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || err != nil && strings.Contains(err.Error(), "address already in use")
}
