// Package fleet owns the fleet's store: what a node reads and writes in the
// shared control plane (keys, revisions, transactions, watches and leases),
// behind a small Store interface so that another engine could follow etcd.
// It holds no DNS logic: what the keys mean belongs to the packages that
// use it.
//
// The model is etcd's: one totally ordered history of revisions; every
// key carries the revision that last modified it; a watch from revision r
// delivers every change at r and after, in order, with no gaps, unless r
// has been compacted away, in which case the caller must read everything
// again (Follow does that).
package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limits of one transaction, as etcd enforces them by default
// (--max-txn-ops 128, --max-request-bytes 1.5 MiB). Store implementations
// refuse a transaction over them before sending it, with ErrTooManyOps or
// ErrTooLarge, so the caller learns why without a round trip.
const (
	// MaxTxnOps is the most compares, and separately the most puts and
	// deletes together, in one Txn.
	MaxTxnOps = 128
	// MaxRequestBytes is the largest request etcd accepts. A Txn's size
	// is estimated as its keys and values plus a fixed overhead per
	// operation (txnOpOverhead) and must stay under it.
	MaxRequestBytes = 1536 * 1024
)

// txnOpOverhead is a generous estimate of the protobuf framing per
// operation in a transaction (tags, lengths, lease, range end).
const txnOpOverhead = 32

// Errors a Store returns, wrapped with what was being done; test them
// with errors.Is.
var (
	ErrTooManyOps = errors.New("too many operations in one transaction")
	ErrTooLarge   = errors.New("request too large")
	ErrEmptyKey   = errors.New("empty key")
	ErrCompacted  = errors.New("revision compacted")
	ErrLeaseLost  = errors.New("lease lost")
	ErrClosed     = errors.New("store closed")
)

// KV is one key and its value as stored.
type KV struct {
	Key   string
	Value []byte
	// Rev is the revision that last modified the key (etcd's mod
	// revision). In a Txn's puts it is ignored.
	Rev int64
	// Lease is the lease the key is bound to, 0 for none. In a Txn's
	// puts, a non-zero Lease binds the key to that lease: the key is
	// deleted when the lease ends.
	Lease int64
}

// EventKind tells a put from a delete.
type EventKind int

// The kinds of Event.
const (
	EventPut EventKind = iota + 1
	EventDelete
)

func (k EventKind) String() string {
	switch k {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is one change seen by a watch. For a delete, KV.Value is empty
// and KV.Rev is the revision of the deletion.
type Event struct {
	Kind EventKind
	KV   KV
}

// WatchResponse is one batch of a watch. The events of one revision (one
// transaction) are never split across responses.
type WatchResponse struct {
	Events []Event
	// Rev is the revision up to which the watcher is complete: every
	// change at or below Rev (and at or above the watch's start) has
	// been delivered. With no events (a progress notification) it is the
	// store's revision.
	Rev int64
	// Compacted is set when the watch's start revision has been
	// compacted away: the events in between are lost and the caller must
	// Get again and watch from that read's revision + 1. CompactRev is
	// the oldest revision still watchable. The channel closes after it.
	Compacted  bool
	CompactRev int64
	// Err ends the watch (the channel closes after it): the store is
	// closed, the member lost its leader, or the watch was refused.
	// Watching again from the last Rev + 1 resumes with no gap.
	Err error
}

// CmpOp is the comparison of a Cmp.
type CmpOp int

// The comparisons a Cmp can make against a key's mod revision.
const (
	CmpEqual CmpOp = iota
	CmpLess
	CmpGreater
)

// Cmp is one condition of a transaction on a key's mod revision. A key
// that does not exist has mod revision 0.
type Cmp struct {
	Key    string
	Op     CmpOp
	ModRev int64
	// Prefix makes Key a prefix: the condition must hold for every key
	// under it (etcd's compare over a range). A range with no key holds
	// as one absent key would (mod revision 0). A key deleted from the
	// range is not seen: only the keys there at commit are compared.
	Prefix bool
}

// ModRevIs holds when key was last modified at rev (compare-and-swap on
// a revision read earlier).
func ModRevIs(key string, rev int64) Cmp { return Cmp{Key: key, Op: CmpEqual, ModRev: rev} }

// Absent holds when key does not exist (create only if absent).
func Absent(key string) Cmp { return Cmp{Key: key, Op: CmpEqual, ModRev: 0} }

// UnchangedSince holds when no key under prefix was put after revision
// rev (each key's mod revision is at most rev): a write conditional on a
// view of the prefix read at rev. Deletions after rev are not seen (a
// deleted key has no mod revision left to compare); a writer that must
// see them too bumps a guard key with every delete and compares it with
// ModRevAtMost.
func UnchangedSince(prefix string, rev int64) Cmp {
	return Cmp{Key: prefix, Op: CmpLess, ModRev: rev + 1, Prefix: true}
}

// ModRevAtMost holds when key was last modified at or before rev, or
// does not exist.
func ModRevAtMost(key string, rev int64) Cmp { return Cmp{Key: key, Op: CmpLess, ModRev: rev + 1} }

// Store is what a node needs of the shared control plane.
//
// Prefixes are plain byte prefixes: "a/b" also matches "a/bc", so name
// directories with a trailing "/". Every error is wrapped with the
// operation and key or prefix it concerns. A context without a deadline
// gets the store's default request timeout, so no call blocks forever
// when the store has lost its quorum.
type Store interface {
	// Get is a linearizable read of every key under prefix, in key
	// order, and the store revision it was read at. It fails when the
	// store cannot reach a quorum.
	Get(ctx context.Context, prefix string) (kvs []KV, rev int64, err error)
	// GetStale reads the same from whichever member the client talks
	// to, without asking the others: it answers without a quorum but
	// may be behind.
	GetStale(ctx context.Context, prefix string) (kvs []KV, rev int64, err error)
	// Txn applies puts and then deletes (exact keys) atomically if every
	// cmp holds; ok reports whether they held, rev is the store revision
	// after the transaction (or at which the compares failed). A key may
	// appear at most once among puts and deletes; deleting an absent key
	// does nothing (a transaction that changes nothing makes no new
	// revision and no watch event). Limits: MaxTxnOps, MaxRequestBytes.
	Txn(ctx context.Context, cmps []Cmp, puts []KV, deletes []string) (ok bool, rev int64, err error)
	// Watch delivers every change under prefix from revision fromRev on
	// (0: from now), in revision order, with no gaps and none twice,
	// riding over reconnections. The channel closes when ctx is done,
	// after a response with Compacted or Err set, or when the store
	// closes.
	Watch(ctx context.Context, prefix string, fromRev int64) <-chan WatchResponse
	// Grant creates a lease of at least ttl (rounded up to a whole
	// second; the store may raise it to its minimum) and keeps it alive
	// until the Lease is closed or lost.
	Grant(ctx context.Context, ttl time.Duration) (Lease, error)
	// Close ends every lease's keep-alive (without revoking: their keys
	// expire after their TTL), every watch, and the connection.
	Close() error
}

// DBStatus is the size of the store's database as its members report it.
type DBStatus struct {
	// Bytes is the largest member database (etcd's DbSize: the file the
	// backend quota, --quota-backend-bytes, is measured against) and
	// InUse the part of it in use (the rest a defragmentation returns).
	Bytes, InUse int64
	// Member is the endpoint that reported Bytes.
	Member string
	// Alarms are the members' active alarms, as they name them (NOSPACE:
	// the quota is reached and every write fails).
	Alarms []string
}

// Sizer is a Store that can report the size of its database.
type Sizer interface {
	// DBStatus asks every member it can reach; it fails only when none
	// answers.
	DBStatus(ctx context.Context) (DBStatus, error)
}

// Lease is a granted lease, kept alive in the background. Keys put under
// it are deleted by the store when it ends: on Close (revoked at once),
// or when the keep-alive has not reached the store for the lease's TTL
// (the node is cut off or dead). A lost lease is not renewed: grant a
// new one and put the keys again.
type Lease interface {
	ID() int64
	// TTL is the time to live the store granted.
	TTL() time.Duration
	// Put writes key under the lease.
	Put(ctx context.Context, key string, value []byte) (rev int64, err error)
	// Done is closed when the lease has ended: lost (Err returns an
	// error wrapping ErrLeaseLost) or closed (Err returns nil).
	Done() <-chan struct{}
	Err() error
	// Close stops the keep-alive and revokes the lease, deleting its
	// keys. It is safe to call more than once.
	Close(ctx context.Context) error
}

// checkTxn enforces the limits of one transaction.
func checkTxn(cmps []Cmp, puts []KV, deletes []string) error {
	if len(cmps) > MaxTxnOps {
		return fmt.Errorf("%d compares, at most %d: %w", len(cmps), MaxTxnOps, ErrTooManyOps)
	}
	if n := len(puts) + len(deletes); n > MaxTxnOps {
		return fmt.Errorf("%d puts and deletes, at most %d: %w", n, MaxTxnOps, ErrTooManyOps)
	}
	size := 0
	for _, c := range cmps {
		if c.Key == "" {
			return fmt.Errorf("compare: %w", ErrEmptyKey)
		}
		size += len(c.Key) + txnOpOverhead
	}
	for _, p := range puts {
		if p.Key == "" {
			return fmt.Errorf("put: %w", ErrEmptyKey)
		}
		size += len(p.Key) + len(p.Value) + txnOpOverhead
	}
	for _, d := range deletes {
		if d == "" {
			return fmt.Errorf("delete: %w", ErrEmptyKey)
		}
		size += len(d) + txnOpOverhead
	}
	if size > MaxRequestBytes {
		return fmt.Errorf("about %d bytes, at most %d: %w", size, MaxRequestBytes, ErrTooLarge)
	}
	return nil
}
