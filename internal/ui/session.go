package ui

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/steer-dns/steer/internal/api"
)

// Session limits.
const (
	// SessionLifetime bounds a session: the cookie and the server's
	// record of it expire together, whatever the browser does.
	SessionLifetime = 12 * time.Hour
	// MaxSessions is how many sessions are held at once; a login past it
	// ends the oldest.
	MaxSessions = 1000
)

// session is one logged-in browser.
type session struct {
	key     [sha256.Size]byte // of the cookie's value; the map's key
	csrf    string
	expires time.Time
	gen     uint64 // the API token's generation at login
}

// sessions is the store: in memory, capped, oldest first. Sessions are
// found by a hash of the cookie's value, so the value itself is not kept.
// A session dies at its expiry, when MaxSessions newer ones push it out,
// at logout, or when the API's token changes (its generation moves on).
type sessions struct {
	gen  func() uint64 // the token generation in force
	now  func() time.Time
	max  int
	life time.Duration

	mu    sync.Mutex
	byKey map[[sha256.Size]byte]*list.Element // of *session
	order *list.List                          // oldest first
}

func newSessions(gen func() uint64) *sessions {
	return &sessions{gen: gen, now: time.Now, max: MaxSessions, life: SessionLifetime,
		byKey: map[[sha256.Size]byte]*list.Element{}, order: list.New()}
}

// random returns 256 random bits, base64url.
func random() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// open starts a session under token generation gen and returns the
// cookie's value and the session.
func (s *sessions) open(gen uint64) (id string, sess *session) {
	id = random()
	sess = &session{key: sha256.Sum256([]byte(id)), csrf: random(), gen: gen}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	sess.expires = now.Add(s.life)
	// Every session lives as long, so the oldest expire first.
	for e := s.order.Front(); e != nil && (s.order.Len() >= s.max || !e.Value.(*session).expires.After(now)); e = s.order.Front() {
		s.remove(e)
	}
	s.byKey[sess.key] = s.order.PushBack(sess)
	return id, sess
}

func (s *sessions) remove(e *list.Element) {
	delete(s.byKey, e.Value.(*session).key)
	s.order.Remove(e)
}

// lookup returns the live session r's cookie names, dropping it when it
// has expired or its token generation has passed.
func (s *sessions) lookup(r *http.Request) (*session, bool) {
	c, err := r.Cookie(api.SessionCookie)
	if err != nil || c.Value == "" {
		return nil, false
	}
	key := sha256.Sum256([]byte(c.Value))
	gen := s.gen()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byKey[key]
	if !ok {
		return nil, false
	}
	sess := e.Value.(*session)
	if sess.gen != gen || !sess.expires.After(s.now()) {
		s.remove(e)
		return nil, false
	}
	return sess, true
}

// Valid implements api.Sessions.
func (s *sessions) Valid(r *http.Request) (csrf string, ok bool) {
	sess, ok := s.lookup(r)
	if !ok {
		return "", false
	}
	return sess.csrf, true
}

// close ends the session r's cookie names, if any.
func (s *sessions) close(r *http.Request) {
	c, err := r.Cookie(api.SessionCookie)
	if err != nil {
		return
	}
	key := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byKey[key]; ok {
		s.remove(e)
	}
}

// len is how many sessions are held (expired ones included until they
// are looked up or pushed out).
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
