package metrics

// Tally holds the counts of the queries one goroutine answered since it
// last flushed, in plain integers. A batched UDP reader counts each batch
// of datagrams into its own Tally and adds it to the shared counters
// once, after the batch: one atomic add per counter the batch touched
// instead of seven per query (a locked add costs about what parsing the
// question does). Counts reach /metrics at the end of their batch.
//
// A Tally is used by one goroutine at a time; its zero value counts
// nothing until Bind. Its methods mirror Metrics' and do not allocate.
type Tally struct {
	m *Metrics
	// The query counters a batch touches are few of many: they are
	// kept as (index, count) pairs, spilled to m when full.
	q  [8]tallyEntry // index into m.queries
	nq int
	// The scopes of a batch's steered answers are many (a partition's
	// leaves lie at every depth): each has its count here, by
	// family*(maxScope+1) + prefix length, and the ones counted are
	// listed for Flush.
	scope   [2 * (maxScope + 1)]uint32
	scopes  [2 * (maxScope + 1)]uint16
	nscopes int

	bytes     [numTransports]uint64
	dropped   [numTransports]uint64
	truncated uint64
	ecs       [numECSKinds]uint64
	cookies   [len(cookieNames)]uint64
	nocookie  [2]uint64
	dirty     bool
}

type tallyEntry struct {
	i uint32
	n uint64
}

// Bind makes t count into m (nil: count nothing), flushing what it holds
// for the Metrics it counted into before.
func (t *Tally) Bind(m *Metrics) {
	if t.m != m {
		t.Flush()
		t.m = m
	}
}

// Flush adds what t holds to its Metrics and empties it.
func (t *Tally) Flush() {
	if !t.dirty {
		return
	}
	t.dirty = false
	m := t.m
	for _, e := range t.q[:t.nq] {
		m.queries[e.i].Add(e.n)
	}
	t.nq = 0
	for _, i := range t.scopes[:t.nscopes] {
		m.scope[i/(maxScope+1)][i%(maxScope+1)].Add(uint64(t.scope[i]))
		t.scope[i] = 0
	}
	t.nscopes = 0
	for i := range t.bytes {
		if t.bytes[i] != 0 {
			m.transport[i].bytes.Add(t.bytes[i])
		}
		if t.dropped[i] != 0 {
			m.transport[i].dropped.Add(t.dropped[i])
		}
	}
	if t.truncated != 0 {
		m.truncated.Add(t.truncated)
	}
	for i, n := range t.ecs {
		if n != 0 {
			m.ecs[i].Add(n)
		}
	}
	for i, n := range t.cookies {
		if n != 0 {
			m.ab.cookies[i].Add(n)
		}
	}
	for i, n := range t.nocookie {
		if n != 0 {
			m.ab.nocookie[i].Add(n)
		}
	}
	t.bytes, t.dropped, t.ecs, t.cookies, t.nocookie = [numTransports]uint64{}, [numTransports]uint64{}, [numECSKinds]uint64{}, [len(cookieNames)]uint64{}, [2]uint64{}
	t.truncated = 0
}

// add counts one at index i in the pairs es[:*n]; false when they are
// full of other indexes (the caller counts it in Metrics directly).
func add(es []tallyEntry, n *int, i uint32) bool {
	for k := range es[:*n] {
		if es[k].i == i {
			es[k].n++
			return true
		}
	}
	if *n == len(es) {
		return false
	}
	es[*n] = tallyEntry{i: i, n: 1}
	*n++
	return true
}

// Query is Metrics.Query, tallied.
func (t *Tally) Query(tr Transport, rcode int, qtype uint16, fast bool, size int) {
	if t.m == nil || tr >= numTransports {
		return
	}
	path := 0
	if fast {
		path = 1
	}
	t.dirty = true
	i := uint32(queryIndex(tr, rcodeIndex(rcode), qtypeIndex(qtype), path))
	if !add(t.q[:], &t.nq, i) {
		t.m.queries[i].Add(1)
	}
	if size > 0 {
		t.bytes[tr] += uint64(size)
	}
}

// Dropped is Metrics.Dropped, tallied.
func (t *Tally) Dropped(tr Transport) {
	if t.m != nil && tr < numTransports {
		t.dirty = true
		t.dropped[tr]++
	}
}

// Truncated is Metrics.Truncated, tallied.
func (t *Tally) Truncated() {
	if t.m != nil {
		t.dirty = true
		t.truncated++
	}
}

// ECS is Metrics.ECS, tallied.
func (t *Tally) ECS(k ECSKind) {
	if t.m != nil && k < numECSKinds {
		t.dirty = true
		t.ecs[k]++
	}
}

// Scope is Metrics.Scope, tallied.
func (t *Tally) Scope(v6 bool, scope int) {
	f := 0
	if v6 {
		f = 1
	}
	if t.m == nil || uint(scope) > uint(maxScopeFamily[f]) {
		return
	}
	t.dirty = true
	i := f*(maxScope+1) + scope
	if t.scope[i] == 0 {
		t.scopes[t.nscopes] = uint16(i)
		t.nscopes++
	}
	t.scope[i]++
}

// Cookie is Metrics.Cookie, tallied.
func (t *Tally) Cookie(s uint8) {
	if t.m != nil && int(s) < len(cookieNames) {
		t.dirty = true
		t.cookies[s]++
	}
}

// NoCookieUDP is Metrics.NoCookieUDP, tallied.
func (t *Tally) NoCookieUDP(in, out int) {
	if t.m != nil {
		t.dirty = true
		t.nocookie[0] += uint64(in)
		t.nocookie[1] += uint64(out)
	}
}
