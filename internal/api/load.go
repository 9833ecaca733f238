package api

import (
	"errors"
	"github.com/steer-dns/steer/internal/loadfeed"
	"io"
	"net/http"
	"time"
)

// LoadBackend is implemented by a backend that takes pools' loads
// (capacity feedback); without it PUT and GET /v1/load answer 404.
type LoadBackend interface {
	// PutLoad applies one batch of loads read from body (LoadBody) as
	// one step of the feedback loop, all or nothing: a bad item is an
	// ErrBadInput, an unknown record or pool an ErrNotFound, each naming
	// the item.
	PutLoad(body io.Reader) (LoadResult, error)
	// Loads describes every capacity pool.
	Loads() LoadStatus
}

// LoadBody is the body of PUT /v1/load and the content of a load file,
// in the shape of Akamai GTM's load objects (package loadfeed, which the
// node and steer simulate read it with).
type LoadBody = loadfeed.Body

// LoadItem is one pool's load.
type LoadItem = loadfeed.Item

// LoadResult is the body of a successful PUT /v1/load.
type LoadResult struct {
	Applied int        `json:"applied"`
	Pools   []PoolLoad `json:"pools"`
}

// LoadStatus is the body of GET /v1/load.
type LoadStatus struct {
	Files      []string   `json:"files,omitempty"`
	MaxShift   float64    `json:"max_shift"`
	LowWater   float64    `json:"low_water"`
	StaleAfter string     `json:"stale_after"`
	LastUpdate time.Time  `json:"last_update,omitzero"`
	LastSource string     `json:"last_source,omitempty"`
	Pools      []PoolLoad `json:"pools"`
	// Pending lists the loads put on this node that a fleet's store
	// has not taken yet (written when it answers, unless stale by then).
	Pending []string `json:"pending,omitempty"`
}

// PoolLoad is one capacity pool's state.
type PoolLoad struct {
	Record string  `json:"record"`
	Pool   string  `json:"pool"`
	Target float64 `json:"target"`
	// Max is omitted when the pool has none.
	Max       *float64  `json:"max,omitempty"`
	Load      float64   `json:"load"`
	At        time.Time `json:"at,omitzero"`
	Percent   float64   `json:"percent_of_target"`
	State     string    `json:"state"`
	Networks  int       `json:"networks"`
	Shed      int       `json:"shed"`
	ShedShare float64   `json:"shed_share"`
	Reason    string    `json:"reason"`
}

func (s *server) loadRoutes() {
	s.mux.HandleFunc("PUT /v1/load", s.putLoad)
	s.mux.HandleFunc("GET /v1/load", s.getLoad)
}

func (s *server) putLoad(w http.ResponseWriter, r *http.Request) {
	lb, ok := s.b.(LoadBackend)
	if !ok {
		writeError(w, http.StatusNotFound, "capacity feedback is not available")
		return
	}
	res, err := lb.PutLoad(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var pe *PendingError
		switch {
		case errors.As(err, &pe):
			writeJSON(w, http.StatusAccepted, map[string]any{"applied": "this node", "pending": pe.Where, "reason": pe.Reason, "pools": res.Pools})
		case errors.As(err, &mbe):
			writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		case errors.Is(err, ErrNotFound):
			writeError(w, http.StatusNotFound, err.Error())
		case errors.Is(err, ErrBadInput):
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) getLoad(w http.ResponseWriter, r *http.Request) {
	lb, ok := s.b.(LoadBackend)
	if !ok {
		writeError(w, http.StatusNotFound, "capacity feedback is not available")
		return
	}
	writeJSON(w, http.StatusOK, lb.Loads())
}
