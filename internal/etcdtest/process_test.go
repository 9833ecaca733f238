package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd binary's server keeps what it was given across Stop and Start,
// and the client steer uses talks to Debian's (older) server.
func TestProcessStopStart(t *testing.T) {
	p := StartProcess(t)
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint()}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Put(ctx, "/steer-test/k", "v"); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	if _, err := cl.Get(short, "/steer-test/k"); err == nil {
		t.Fatal("a read succeeded with the process stopped")
	}
	cancelShort()
	p.Start()
	r, err := cl.Get(ctx, "/steer-test/k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("after a restart: %v %v", r, err)
	}
}
