package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/snapshot"
)

// copyKeeper writes the last good copies of the zones each served
// snapshot parsed (snapshot.Copies) into the state directory, in the
// background and in the order the snapshots were served, so that a
// newer copy is never overwritten by an older one. A start with 100,000
// zones answers first and writes its copies after; a reload writes
// those of the zones it parsed only.
type copyKeeper struct {
	log     *slog.Logger
	mu      sync.Mutex
	queue   []*snapshot.Copies
	running bool
	idle    chan struct{} // closed when the queue empties; nil while idle
	// drained, when set, is called each time the queue empties: the
	// node gives the memory the writing made (and, after a start, the
	// parse's garbage) back to the system.
	drained func()
}

// add queues c (nil: nothing).
func (k *copyKeeper) add(c *snapshot.Copies) {
	if c == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.queue = append(k.queue, c)
	if !k.running {
		k.running = true
		k.idle = make(chan struct{})
		go k.run()
	}
}

func (k *copyKeeper) run() {
	for {
		k.mu.Lock()
		if len(k.queue) == 0 {
			k.running = false
			close(k.idle)
			k.idle = nil
			k.mu.Unlock()
			if k.drained != nil {
				k.drained()
			}
			return
		}
		c := k.queue[0]
		k.queue[0] = nil
		k.queue = k.queue[1:]
		k.mu.Unlock()
		t0, n := time.Now(), c.Len()
		for _, w := range c.Keep() {
			k.log.Warn(w.String())
		}
		k.log.Debug("last good copies kept", "zones", n, "took", time.Since(t0).Round(time.Millisecond))
	}
}

// wait returns when every queued copy is written, or ctx is done.
func (k *copyKeeper) wait(ctx context.Context) {
	k.mu.Lock()
	idle := k.idle
	k.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
