package api

import (
	"errors"
	"net/http"
	"time"
)

// ZoneTransfer is a zone's transfer state in GET /v1/status.
type ZoneTransfer struct {
	// Secondary zones (transferred in).
	Primaries    []string  `json:"primaries,omitempty"`
	Primary      string    `json:"primary,omitempty"` // the one last transferred from
	LastTransfer string    `json:"last_transfer,omitempty"`
	Refreshed    time.Time `json:"refreshed,omitempty"`
	NextRefresh  time.Time `json:"next_refresh,omitempty"`
	Expires      time.Time `json:"expires,omitempty"`
	Expired      bool      `json:"expired,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
	// Zones transferred out.
	Secondaries    int    `json:"secondaries,omitempty"`
	ExportedSerial uint32 `json:"exported_serial,omitempty"`
	FileSerial     uint32 `json:"file_serial,omitempty"` // when steer gave the zone a newer serial
	Journal        int    `json:"ixfr_journal,omitempty"`
}

// TransferBackend is implemented by a backend with secondary zones.
type TransferBackend interface {
	// RefreshZone checks a secondary zone's primaries now and transfers it
	// when their serial is newer (as after a NOTIFY); ErrNotFound for a
	// zone that is not a secondary here.
	RefreshZone(zone string) error
}

func (s *server) transferRoutes() {
	tb, ok := s.b.(TransferBackend)
	if !ok {
		return
	}
	s.mux.HandleFunc("POST /v1/zones/{zone}/refresh", func(w http.ResponseWriter, r *http.Request) {
		zone := r.PathValue("zone")
		err := tb.RefreshZone(zone)
		switch {
		case errors.Is(err, ErrNotFound):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		default:
			s.log.Info("admin API: zone refresh", "zone", zone, "remote", r.RemoteAddr)
			w.WriteHeader(http.StatusAccepted)
		}
	})
}
