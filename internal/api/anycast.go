package api

import (
	"errors"
	"net/http"
	"time"
)

// AnycastBackend is implemented by a Backend that runs an anycast BGP
// speaker; NewHandler then serves GET /v1/anycast and POST
// /v1/anycast/{announce,withdraw,auto}.
type AnycastBackend interface {
	// Anycast describes the announcement, or returns ErrNotFound when
	// anycast is not configured.
	Anycast() (*AnycastStatus, error)
	// SetAnycastControl sets the operator's control: "announce" (a standby
	// node announces while healthy), "withdraw" (withdrawn whatever the
	// checks say) or "auto" (back to the configured mode). It returns the
	// status after the change.
	SetAnycastControl(control string) (*AnycastStatus, error)
}

// AnycastStatus is the body of GET /v1/anycast and the anycast part of
// /v1/status.
type AnycastStatus struct {
	Mode      string   `json:"mode"`    // active or standby
	Control   string   `json:"control"` // auto, announce or withdraw
	Announced bool     `json:"announced"`
	Prefixes  []string `json:"prefixes"`
	// ASPath is the AS path an eBGP peer receives, while announced.
	ASPath      []uint32           `json:"as_path,omitempty"`
	Reason      string             `json:"reason"`
	Detail      string             `json:"detail"`
	Since       time.Time          `json:"since"`
	Conditions  []AnycastCondition `json:"conditions"`
	HealthScore float64            `json:"health_score"`
	QPS         float64            `json:"qps"`
	Overloaded  bool               `json:"overloaded"`
	Peers       []AnycastPeer      `json:"peers"`
	Transitions map[string]uint64  `json:"transitions"`
}

// AnycastCondition is one thing that must hold for the node to announce.
type AnycastCondition struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// AnycastPeer is one BGP neighbour's session.
type AnycastPeer struct {
	Address  string     `json:"address"`
	RemoteAS uint32     `json:"remote_as"`
	State    string     `json:"state"`
	Since    *time.Time `json:"established_since,omitempty"`
	Uptime   string     `json:"uptime,omitempty"`
}

// anycastRoutes adds the anycast endpoints when the backend has them.
func (s *server) anycastRoutes() {
	ab, ok := s.b.(AnycastBackend)
	if !ok {
		return
	}
	s.mux.HandleFunc("GET /v1/anycast", func(w http.ResponseWriter, r *http.Request) {
		st, err := ab.Anycast()
		s.anycastReply(w, st, err)
	})
	for _, ctl := range []string{"announce", "withdraw", "auto"} {
		s.mux.HandleFunc("POST /v1/anycast/"+ctl, func(w http.ResponseWriter, r *http.Request) {
			st, err := ab.SetAnycastControl(ctl)
			if err == nil {
				s.log.Info("admin API: anycast control set", "control", ctl, "remote", r.RemoteAddr)
			}
			s.anycastReply(w, st, err)
		})
	}
}

func (s *server) anycastReply(w http.ResponseWriter, st *AnycastStatus, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, st)
	}
}
