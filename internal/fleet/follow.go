package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handler receives what Follow sees. Follow calls its functions from one
// goroutine, one at a time, in revision order.
type Handler struct {
	// Snapshot is the whole state under the prefix at rev: it replaces
	// everything the handler knew. It is called first, and again after
	// a compaction made the watch lose events.
	Snapshot func(kvs []KV, rev int64)
	// Events are the changes of one or more whole revisions, up to rev,
	// on top of the last snapshot and events.
	Events func(evs []Event, rev int64)
	// Progress, if set, says the view is complete up to rev with no
	// change since (the store answered; nothing happened).
	Progress func(rev int64)
	// Error, if set, is told each failed read or watch; Follow retries
	// with a backoff and the view stays as it was (it may be stale).
	Error func(err error)
}

// Follow backoff between retries after a failed read or watch.
const (
	followMinBackoff = 100 * time.Millisecond
	followMaxBackoff = 5 * time.Second
)

// Follow keeps h in step with everything under prefix until ctx is done,
// and then returns ctx's error. It is the one safe recipe for a view of a
// prefix:
//
//  1. Get the prefix (linearizable) → Snapshot(kvs, rev);
//  2. Watch from rev + 1 → Events, in order, with no gaps;
//  3. on an error (member lost its leader, store unreachable), watch
//     again from the last revision seen + 1, after a backoff;
//  4. on Compacted (the revisions after the last seen are gone), go to 1.
//
// A failed Get is retried with a backoff; meanwhile h keeps its last view.
// Follow returns early only when the store is closed (ErrClosed).
func Follow(ctx context.Context, s Store, prefix string, h Handler) error {
	backoff := followMinBackoff
	wait := func(err error) bool {
		if h.Error != nil {
			h.Error(err)
		}
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, followMaxBackoff)
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var rev int64
	needSnapshot := true
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if needSnapshot {
			kvs, r, err := s.Get(ctx, prefix)
			if err != nil {
				if errors.Is(err, ErrClosed) {
					return err
				}
				if ctx.Err() != nil || !wait(err) {
					return ctx.Err()
				}
				continue
			}
			h.Snapshot(kvs, r)
			rev, needSnapshot, backoff = r, false, followMinBackoff
		}
		err := follow(ctx, s, prefix, h, &rev, &needSnapshot, &backoff)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		if err == nil {
			err = fmt.Errorf("fleet: watch prefix %q from revision %d ended", prefix, rev+1)
		}
		if err != nil && !needSnapshot && !wait(err) {
			return ctx.Err()
		}
	}
}

// follow runs one watch from *rev + 1 until it ends, advancing *rev.
func follow(ctx context.Context, s Store, prefix string, h Handler, rev *int64, needSnapshot *bool, backoff *time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range s.Watch(wctx, prefix, *rev+1) {
		switch {
		case wr.Compacted:
			*needSnapshot = true
			if h.Error != nil {
				h.Error(wr.Err)
			}
			return wr.Err
		case wr.Err != nil:
			return wr.Err
		}
		*backoff = followMinBackoff
		if len(wr.Events) > 0 {
			h.Events(wr.Events, wr.Rev)
		} else if h.Progress != nil && wr.Rev > *rev {
			h.Progress(wr.Rev)
		}
		*rev = max(*rev, wr.Rev)
	}
	return nil
}
