package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/etcdtest"
	"github.com/steer-dns/steer/internal/fleet"
)

// open opens a store on endpoints, closed at cleanup.
func open(t *testing.T, cfg fleet.EtcdConfig) fleet.Store {
	t.Helper()
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	s, err := fleet.OpenEtcd(cfg)
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t *testing.T, s fleet.Store, key, value string) int64 {
	t.Helper()
	ok, rev, err := s.Txn(context.Background(), nil, []fleet.KV{{Key: key, Value: []byte(value)}}, nil)
	if err != nil || !ok {
		t.Fatalf("put %s: ok=%v %v", key, ok, err)
	}
	return rev
}

func del(t *testing.T, s fleet.Store, key string) int64 {
	t.Helper()
	ok, rev, err := s.Txn(context.Background(), nil, nil, []string{key})
	if err != nil || !ok {
		t.Fatalf("delete %s: ok=%v %v", key, ok, err)
	}
	return rev
}

// state reads prefix as a map key → value.
func state(t *testing.T, s fleet.Store, prefix string) (map[string]string, int64) {
	t.Helper()
	kvs, rev, err := s.Get(context.Background(), prefix)
	if err != nil {
		t.Fatalf("get %s: %v", prefix, err)
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = string(kv.Value)
	}
	return m, rev
}

func TestTxnCompareAndSwap(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	// Two writers, each through its own member.
	w := []fleet.Store{
		open(t, fleet.EtcdConfig{Endpoints: []string{c.Member(0).Endpoint()}}),
		open(t, fleet.EtcdConfig{Endpoints: []string{c.Member(1).Endpoint()}}),
	}
	ctx := context.Background()
	const key = "/cas/head"

	race := func(cmp func(rev int64) fleet.Cmp, rev int64, round int) (winners int, revs [2]int64) {
		var wg sync.WaitGroup
		var oks [2]bool
		var errs [2]error
		start := make(chan struct{})
		for i := range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				oks[i], revs[i], errs[i] = w[i].Txn(ctx, []fleet.Cmp{cmp(rev)},
					[]fleet.KV{{Key: key, Value: []byte(fmt.Sprintf("round %d writer %d", round, i))}}, nil)
			}()
		}
		close(start)
		wg.Wait()
		for i := range w {
			if errs[i] != nil {
				t.Fatalf("round %d writer %d: %v", round, i, errs[i])
			}
			if oks[i] {
				winners++
			}
		}
		return winners, revs
	}

	// Create if absent: one creator wins.
	if n, _ := race(func(int64) fleet.Cmp { return fleet.Absent(key) }, 0, -1); n != 1 {
		t.Fatalf("create race: %d winners, want 1", n)
	}
	for round := 0; round < 20; round++ {
		kvs, _, err := w[0].Get(ctx, key)
		if err != nil || len(kvs) != 1 {
			t.Fatalf("round %d: get: %v %v", round, kvs, err)
		}
		n, revs := race(func(rev int64) fleet.Cmp { return fleet.ModRevIs(key, rev) }, kvs[0].Rev, round)
		if n != 1 {
			t.Fatalf("round %d: %d writers won the swap of revision %d, want exactly 1 (revs %v)", round, n, kvs[0].Rev, revs)
		}
	}
	// A stale revision never wins.
	ok, _, err := w[0].Txn(ctx, []fleet.Cmp{fleet.ModRevIs(key, 1)}, []fleet.KV{{Key: key, Value: []byte("stale")}}, nil)
	if err != nil || ok {
		t.Fatalf("swap on a stale revision: ok=%v %v", ok, err)
	}
}

// TestTxnPrefixCompare: a write conditional on a prefix's view read at
// revision R fails once any key under the prefix was put after R, and
// only then (a key beside the prefix, or one put before R, does not
// count); an empty prefix holds. A deletion is not seen by the prefix
// compare: that is what a guard key's ModRevAtMost is for.
func TestTxnPrefixCompare(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	s := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	ctx := context.Background()
	const p = "/pc/overrides/"
	write := func(rev int64, extra ...fleet.Cmp) bool {
		t.Helper()
		ok, _, err := s.Txn(ctx, append([]fleet.Cmp{fleet.UnchangedSince(p, rev)}, extra...), []fleet.KV{{Key: "/pc/result", Value: []byte("x")}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	_, r0 := state(t, s, p)
	if !write(r0) {
		t.Fatal("an empty prefix: the compare fails")
	}
	put(t, s, p+"a", "1")
	if write(r0) {
		t.Fatal("a key put under the prefix after the view: the compare holds")
	}
	_, r1 := state(t, s, p)
	put(t, s, "/pc/overrides-guard", "beside")
	put(t, s, "/pc/other/b", "beside")
	if !write(r1) {
		t.Fatal("keys beside the prefix changed: the compare fails")
	}
	put(t, s, p+"b", "2")
	if write(r1) {
		t.Fatal("a second key put under the prefix after the view: the compare holds")
	}
	_, r2 := state(t, s, p)
	del(t, s, p+"a")
	if !write(r2) {
		t.Fatal("a deletion: the prefix compare fails, want it unseen (documented)")
	}
	guard := "/pc/overrides-guard"
	_, r3 := state(t, s, p)
	if !write(r3, fleet.ModRevAtMost(guard, r3)) {
		t.Fatal("the guard unchanged: the compare fails")
	}
	put(t, s, guard, "bumped with a delete")
	if write(r3, fleet.ModRevAtMost(guard, r3)) {
		t.Fatal("the guard bumped after the view: the compare holds")
	}
}

func TestWatchDeliversEveryEventInOrder(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	writer := open(t, fleet.EtcdConfig{Endpoints: []string{c.Member(0).Endpoint()}})
	watcher := open(t, fleet.EtcdConfig{Endpoints: []string{c.Member(2).Endpoint()}})
	const prefix = "/watch/"
	put(t, writer, "/other/x", "outside the prefix")
	_, rev0 := state(t, watcher, prefix)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wch := watcher.Watch(ctx, prefix, rev0+1)

	// 200 changes, one revision each: puts, overwrites and deletes,
	// with writes outside the prefix in between.
	type change struct {
		kind  fleet.EventKind
		key   string
		value string
		rev   int64
	}
	// (Deleting an absent key makes no revision and no event: only
	// existing keys are deleted.)
	var want []change
	exists := map[string]bool{}
	t0 := time.Now()
	for i := 0; len(want) < 200; i++ {
		switch {
		case i%7 == 6:
			put(t, writer, "/other/y", "noise")
		case i%10 == 9 && exists[fmt.Sprintf("%sk%03d", prefix, i-1)]:
			k := fmt.Sprintf("%sk%03d", prefix, i-1)
			want = append(want, change{fleet.EventDelete, k, "", del(t, writer, k)})
			delete(exists, k)
		case i%5 == 4:
			k := fmt.Sprintf("%sk%03d", prefix, i-2)
			want = append(want, change{fleet.EventPut, k, "again", put(t, writer, k, "again")})
			exists[k] = true
		default:
			k := fmt.Sprintf("%sk%03d", prefix, i)
			v := fmt.Sprint(i)
			want = append(want, change{fleet.EventPut, k, v, put(t, writer, k, v)})
			exists[k] = true
		}
	}
	t.Logf("200 changes written in %v", time.Since(t0).Round(time.Millisecond))

	var got []change
	collect := func(wch <-chan fleet.WatchResponse, n int) []change {
		var got []change
		for len(got) < n {
			select {
			case wr, ok := <-wch:
				if !ok {
					t.Fatalf("watch closed after %d events", len(got))
				}
				if wr.Err != nil {
					t.Fatalf("watch after %d events: %v", len(got), wr.Err)
				}
				for _, ev := range wr.Events {
					got = append(got, change{ev.Kind, ev.KV.Key, string(ev.KV.Value), ev.KV.Rev})
				}
				if len(wr.Events) > 0 && wr.Rev != wr.Events[len(wr.Events)-1].KV.Rev {
					t.Errorf("response Rev %d, last event at %d", wr.Rev, wr.Events[len(wr.Events)-1].KV.Rev)
				}
			case <-ctx.Done():
				t.Fatalf("watch: %d of %d events before the deadline", len(got), n)
			}
		}
		return got
	}
	got = collect(wch, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// Nothing more, nothing twice.
	select {
	case wr := <-wch:
		if len(wr.Events) > 0 || wr.Err != nil {
			t.Fatalf("extra watch response %+v", wr)
		}
	case <-time.After(200 * time.Millisecond):
	}

	// A watch from the middle gets exactly the tail.
	mid := want[100].rev
	got = collect(watcher.Watch(ctx, prefix, mid), len(want)-100)
	for i := range got {
		if got[i] != want[100+i] {
			t.Fatalf("tail event %d: got %+v, want %+v", i, got[i], want[100+i])
		}
	}
}

func TestWatchFromCompactedRevision(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	s := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	const prefix = "/compact/"
	first := put(t, s, prefix+"a", "1")
	for i := 0; i < 10; i++ {
		put(t, s, prefix+"a", fmt.Sprint(i))
	}
	last := put(t, s, prefix+"b", "2")
	c.Compact(last)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wch := s.Watch(ctx, prefix, first)
	select {
	case wr, ok := <-wch:
		if !ok || !wr.Compacted || wr.CompactRev != last || !errors.Is(wr.Err, fleet.ErrCompacted) {
			t.Fatalf("watch from compacted %d: %+v (open %v), want Compacted at %d", first, wr, ok, last)
		}
		if !strings.Contains(wr.Err.Error(), prefix) {
			t.Errorf("compaction error %q does not name the prefix", wr.Err)
		}
	case <-ctx.Done():
		t.Fatal("no response to a watch from a compacted revision")
	}
	select {
	case wr, ok := <-wch:
		if ok {
			t.Fatalf("watch still open after Compacted: %+v", wr)
		}
	case <-ctx.Done():
		t.Fatal("watch not closed after Compacted")
	}
}

// view is a Follow handler's state.
type view struct {
	mu        sync.Mutex
	kv        map[string]string
	rev       int64
	snapshots int
	errs      int
}

func (v *view) handler() fleet.Handler {
	return fleet.Handler{
		Snapshot: func(kvs []fleet.KV, rev int64) {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.kv = make(map[string]string)
			for _, kv := range kvs {
				v.kv[kv.Key] = string(kv.Value)
			}
			v.rev = rev
			v.snapshots++
		},
		Events: func(evs []fleet.Event, rev int64) {
			v.mu.Lock()
			defer v.mu.Unlock()
			for _, ev := range evs {
				if ev.KV.Rev <= v.rev {
					panic(fmt.Sprintf("event at %d after the view reached %d", ev.KV.Rev, v.rev))
				}
				switch ev.Kind {
				case fleet.EventPut:
					v.kv[ev.KV.Key] = string(ev.KV.Value)
				case fleet.EventDelete:
					delete(v.kv, ev.KV.Key)
				}
			}
			v.rev = rev
		},
		Error: func(error) {
			v.mu.Lock()
			v.errs++
			v.mu.Unlock()
		},
	}
}

// waitFor waits up to d for v to hold want at revision ≥ rev.
func (v *view) waitFor(t *testing.T, want map[string]string, rev int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v.mu.Lock()
		ok := v.rev >= rev && maps.Equal(v.kv, want)
		got, gotRev := maps.Clone(v.kv), v.rev
		v.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("view after %v: at %d %v; want at ≥ %d %v", d, gotRev, got, rev, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFollowReconnectsAndRereadsAfterCompaction(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	direct := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	b := etcdtest.NewBridge(t, c.Member(0).Addr())
	follower := open(t, fleet.EtcdConfig{Endpoints: []string{b.Addr()}})
	const prefix = "/follow/"
	for i := 0; i < 5; i++ {
		put(t, direct, fmt.Sprintf("%s%d", prefix, i), "before")
	}

	v := &view{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fleet.Follow(ctx, follower, prefix, v.handler()) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Follow returned %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Follow did not return after its context ended")
		}
	}()
	want, rev := state(t, direct, prefix)
	v.waitFor(t, want, rev, 10*time.Second)

	// Connections reset: the watch resumes where it was, no re-read.
	b.Drop()
	put(t, direct, prefix+"1", "during the reset")
	del(t, direct, prefix+"2")
	want, rev = state(t, direct, prefix)
	v.waitFor(t, want, rev, 20*time.Second)
	v.mu.Lock()
	snaps := v.snapshots
	v.mu.Unlock()
	if snaps != 1 {
		t.Fatalf("%d snapshots after a reset, want 1 (the watch should resume)", snaps)
	}

	// Cut off while the history it needs is compacted away.
	b.Cut()
	put(t, direct, prefix+"3", "while cut")
	del(t, direct, prefix+"4")
	put(t, direct, prefix+"new", "while cut")
	want, rev = state(t, direct, prefix)
	c.Compact(rev)
	b.Drop()
	b.Heal()
	t0 := time.Now()
	v.waitFor(t, want, rev, 20*time.Second)
	t.Logf("view correct %v after the link healed (%d snapshots, %d errors seen)", time.Since(t0), v.snapshots, v.errs)
	v.mu.Lock()
	snaps = v.snapshots
	v.mu.Unlock()
	if snaps != 2 {
		t.Fatalf("%d snapshots after a compaction, want 2", snaps)
	}
	// And it goes on following.
	put(t, direct, prefix+"after", "x")
	want, rev = state(t, direct, prefix)
	v.waitFor(t, want, rev, 10*time.Second)
}

func TestLeaseExpiresAfterCut(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{})
	direct := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	for _, ttl := range []time.Duration{2 * time.Second, 3 * time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			t.Parallel()
			b := etcdtest.NewBridge(t, c.Member(0).Addr())
			// The node reaches etcd only through the bridge.
			node := open(t, fleet.EtcdConfig{Endpoints: []string{b.Addr()}})
			ctx := context.Background()
			l, err := node.Grant(ctx, ttl)
			if err != nil {
				t.Fatal(err)
			}
			if l.TTL() != ttl {
				t.Fatalf("granted TTL %v, asked %v", l.TTL(), ttl)
			}
			key := fmt.Sprintf("/obs/target/node-%v", ttl)
			if _, err := l.Put(ctx, key, []byte("up")); err != nil {
				t.Fatal(err)
			}
			present := func() bool {
				kvs, _, err := direct.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return len(kvs) == 1 && kvs[0].Lease == l.ID()
			}
			// Kept alive past its TTL while the link is up.
			time.Sleep(ttl + ttl/2)
			if !present() {
				t.Fatalf("leased key gone after %v with the link up: keep-alive failed", ttl+ttl/2)
			}
			select {
			case <-l.Done():
				t.Fatalf("lease ended with the link up: %v", l.Err())
			default:
			}

			b.Cut()
			cut := time.Now()
			var gone time.Duration
			for gone == 0 {
				if !present() {
					gone = time.Since(cut)
				} else if time.Since(cut) > ttl+3*time.Second {
					t.Fatalf("leased key still there %v after the cut", time.Since(cut))
				}
				time.Sleep(20 * time.Millisecond)
			}
			select {
			case <-l.Done():
			case <-time.After(ttl + 3*time.Second - time.Since(cut)):
				t.Fatalf("lease not reported lost %v after the cut", time.Since(cut))
			}
			lost := time.Since(cut)
			if !errors.Is(l.Err(), fleet.ErrLeaseLost) {
				t.Fatalf("lost lease Err() = %v, want ErrLeaseLost", l.Err())
			}
			t.Logf("TTL %v: key deleted %v after the cut (%.2f·TTL); the node saw the lease lost after %v", ttl, gone.Round(time.Millisecond), gone.Seconds()/ttl.Seconds(), lost.Round(time.Millisecond))
			// The client refreshes every TTL/3 (give or take its 500 ms
			// tick) and the server looks for expired leases every
			// 500 ms: the key goes between ⅔·TTL − 0.5 s and TTL + 0.5 s
			// after the cut (plus the revoke's commit and this poll).
			// The bounds checked are looser, for loaded machines.
			if lo, hi := ttl/4, ttl+2*time.Second; gone < lo || gone > hi {
				t.Errorf("key deleted %v after the cut, want between %v and %v", gone, lo, hi)
			}
			if _, err := l.Put(ctx, key, []byte("again")); !errors.Is(err, fleet.ErrLeaseLost) {
				t.Errorf("put under a lost lease: %v, want ErrLeaseLost", err)
			}
			b.Heal()
		})
	}
	t.Run("close revokes", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		l, err := direct.Grant(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Put(ctx, "/obs/closing", nil); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx); err != nil {
			t.Fatalf("second close: %v", err)
		}
		if kvs, _, _ := direct.Get(ctx, "/obs/closing"); len(kvs) != 0 {
			t.Fatalf("key still there after the lease was closed: %v", kvs)
		}
		if l.Err() != nil {
			t.Fatalf("closed lease Err() = %v, want nil", l.Err())
		}
	})
}

func TestQuorumLoss(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3})
	s := open(t, fleet.EtcdConfig{Endpoints: c.Endpoints()})
	const key = "/quorum/config"
	put(t, s, key, "v1")

	// A follower's view survives the outage and catches up after it.
	v := &view{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fleet.Follow(ctx, s, "/quorum/", v.handler())
	want, rev := state(t, s, "/quorum/")
	v.waitFor(t, want, rev, 10*time.Second)

	c.Member(1).Stop()
	c.Member(2).Stop()

	const deadline = 2 * time.Second
	loud := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		t0 := time.Now()
		err := f(ctx)
		took := time.Since(t0)
		if err == nil {
			t.Fatalf("%s with 2 of 3 members down succeeded", what)
		}
		// The deadline, and at most a second probing the endpoints.
		if took > deadline+2*time.Second {
			t.Errorf("%s failed only after %v (deadline %v)", what, took, deadline)
		}
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "etcd") {
			t.Errorf("%s error %q does not say what failed", what, err)
		}
		t.Logf("%s without quorum: failed after %v: %v", what, took.Round(time.Millisecond), err)
	}
	loud("linearizable get", func(ctx context.Context) error {
		_, _, err := s.Get(ctx, key)
		return err
	})
	loud("txn", func(ctx context.Context) error {
		_, _, err := s.Txn(ctx, []fleet.Cmp{fleet.Absent("/quorum/other")}, []fleet.KV{{Key: key, Value: []byte("v2")}}, nil)
		return err
	})
	sctx, scancel := context.WithTimeout(context.Background(), deadline)
	defer scancel()
	kvs, _, err := s.GetStale(sctx, key)
	if err != nil || len(kvs) != 1 || string(kvs[0].Value) != "v1" {
		t.Fatalf("stale get from the survivor: %v %v", kvs, err)
	}

	// One member back: quorum again, and the client finds it.
	c.Member(1).Restart()
	t0 := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _, err := s.Txn(ctx, nil, []fleet.KV{{Key: key, Value: []byte("v2")}}, nil)
		cancel()
		if err == nil {
			break
		}
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("no write 10 s after quorum came back: %v", err)
		}
	}
	t.Logf("write succeeded %v after the second member came back", time.Since(t0).Round(time.Millisecond))
	want, rev = state(t, s, "/quorum/")
	if want[key] != "v2" {
		t.Fatalf("after recovery: %v", want)
	}
	v.waitFor(t, want, rev, 20*time.Second)
	v.mu.Lock()
	snaps, errs := v.snapshots, v.errs
	v.mu.Unlock()
	t.Logf("follower: %d snapshots, %d errors reported during the outage", snaps, errs)
	if snaps != 1 {
		t.Errorf("follower re-read %d times; it should resume its watch", snaps-1)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	files := etcdtest.NewTLS(t)
	c := etcdtest.Start(t, etcdtest.Options{TLS: files, ClientCertAuth: true})
	ep := c.Endpoints()

	good := open(t, fleet.EtcdConfig{Endpoints: ep, CAFile: files.CA, CertFile: files.ClientCert, KeyFile: files.ClientKey})
	put(t, good, "/tls/k", "v")
	if m, _ := state(t, good, "/tls/"); m["/tls/k"] != "v" {
		t.Fatalf("over TLS: %v", m)
	}

	fails := func(name string, cfg fleet.EtcdConfig, want ...string) {
		t.Helper()
		s := open(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _, err := s.Get(ctx, "/tls/")
		if err == nil {
			t.Fatalf("%s: get succeeded", name)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", name, err, w)
			}
		}
		t.Logf("%s: %v", name, err)
	}
	fails("without the CA", fleet.EtcdConfig{Endpoints: ep, CertFile: files.ClientCert, KeyFile: files.ClientKey}, "/tls/", "certificate")
	fails("without a client certificate", fleet.EtcdConfig{Endpoints: ep, CAFile: files.CA}, "/tls/")

	// Bad files are refused when opening, naming the file.
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o600)
	for _, tc := range []struct {
		cfg  fleet.EtcdConfig
		want string
	}{
		{fleet.EtcdConfig{Endpoints: ep, CAFile: filepath.Join(dir, "missing-ca.pem")}, "missing-ca.pem"},
		{fleet.EtcdConfig{Endpoints: ep, CAFile: notPEM}, notPEM},
		{fleet.EtcdConfig{Endpoints: ep, CertFile: files.ClientCert}, files.ClientCert},
		{fleet.EtcdConfig{Endpoints: ep, CertFile: files.ClientCert, KeyFile: filepath.Join(dir, "missing-key.pem")}, "missing-key.pem"},
		{fleet.EtcdConfig{Endpoints: ep, CertFile: files.ClientCert, KeyFile: files.CA}, files.CA},
	} {
		_, err := fleet.OpenEtcd(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenEtcd(%+v): %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

func TestErrorsSayWhatFailed(t *testing.T) {
	t.Parallel()
	// Limits are checked before anything is sent: no cluster needed.
	s := open(t, fleet.EtcdConfig{Endpoints: []string{"127.0.0.1:1"}})
	ctx := context.Background()

	var puts []fleet.KV
	for i := 0; i <= fleet.MaxTxnOps; i++ {
		puts = append(puts, fleet.KV{Key: fmt.Sprintf("/zones/z%d", i)})
	}
	if _, _, err := s.Txn(ctx, nil, puts, nil); !errors.Is(err, fleet.ErrTooManyOps) || !strings.Contains(err.Error(), "/zones/z0") {
		t.Errorf("129 puts: %v", err)
	}
	if _, _, err := s.Txn(ctx, nil, puts[:100], []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h", "/i", "/j", "/k", "/l", "/m", "/n", "/o", "/p", "/q", "/r", "/s", "/t", "/u", "/v", "/w", "/x", "/y", "/z", "/0", "/1", "/2"}); !errors.Is(err, fleet.ErrTooManyOps) {
		t.Errorf("100 puts and 29 deletes: %v", err)
	}
	big := []fleet.KV{{Key: "/config", Value: make([]byte, fleet.MaxRequestBytes)}}
	if _, _, err := s.Txn(ctx, nil, big, nil); !errors.Is(err, fleet.ErrTooLarge) || !strings.Contains(err.Error(), "/config") {
		t.Errorf("1.5 MiB value: %v", err)
	}
	if _, _, err := s.Txn(ctx, nil, []fleet.KV{{Key: ""}}, nil); !errors.Is(err, fleet.ErrEmptyKey) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := s.Grant(ctx, 0); err == nil {
		t.Error("lease of 0 s granted")
	}

	// Nobody listens: the call fails within its deadline, saying what.
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, _, err := s.Get(tctx, "/nodes/")
	if err == nil || !strings.Contains(err.Error(), `"/nodes/"`) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("get from nowhere: %v, want the prefix and the endpoint", err)
	}

	s.Close()
	if _, _, err := s.Get(ctx, "/nodes/"); !errors.Is(err, fleet.ErrClosed) || !strings.Contains(err.Error(), "/nodes/") {
		t.Errorf("get after close: %v", err)
	}
	wr := <-s.Watch(ctx, "/nodes/", 0)
	if !errors.Is(wr.Err, fleet.ErrClosed) {
		t.Errorf("watch after close: %+v", wr)
	}
	if err := fleet.Follow(ctx, s, "/nodes/", fleet.Handler{}); !errors.Is(err, fleet.ErrClosed) {
		t.Errorf("follow after close: %v", err)
	}

	for _, cfg := range []fleet.EtcdConfig{
		{},
		{Endpoints: []string{"http://a:2379", "https://b:2379"}},
		{Endpoints: []string{"unix://x"}},
		{Endpoints: []string{"a:2379"}, Username: "steer"},
	} {
		if _, err := fleet.OpenEtcd(cfg); err == nil {
			t.Errorf("OpenEtcd(%+v) accepted", cfg)
		}
	}
}
