package api

import (
	"errors"
	"net/http"
)

// FleetBackend is the part of DashboardBackend GET /v1/fleet reads; a
// Backend that implements it has the route.
type FleetBackend interface {
	Fleet() (FleetView, error)
}

// fleetRoutes registers GET /v1/fleet when the Backend describes a fleet.
func (s *server) fleetRoutes() {
	if _, ok := s.b.(FleetBackend); ok {
		s.mux.HandleFunc("GET /v1/fleet", s.fleet)
	}
}

// fleet answers GET /v1/fleet: the fleet as this node sees it; 404 off a
// fleet.
func (s *server) fleet(w http.ResponseWriter, r *http.Request) {
	v, err := s.b.(FleetBackend).Fleet()
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrNotFound) {
			code = http.StatusNotFound
		}
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, v)
}
