package api

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"
)

// ErrBadInput is returned (wrapped) by a Backend for a request body it
// rejects; the API answers it with 400 and the error text.
var ErrBadInput = errors.New("bad input")

// MaxLatencyBodyBytes is the largest POST /v1/latency body accepted: a
// few hundred thousand measurements.
const MaxLatencyBodyBytes = 64 << 20

// Latency push formats.
const (
	LatencyJSON = "json"
	LatencyCSV  = "csv"
)

// LatencyResult is the body of a successful POST /v1/latency.
type LatencyResult struct {
	// Applied is the number of measurements in the batch.
	Applied int `json:"applied"`
	// Update is the latency map's update counter after the batch (each
	// push is one update).
	Update uint64 `json:"update"`
	// Networks is how many client networks were evaluated.
	Networks int `json:"networks"`
	// Parse, Store and Evaluate are how long each step took, Took all of
	// them (from the body read to the new choices published).
	Parse    string `json:"parse"`
	Store    string `json:"store"`
	Evaluate string `json:"evaluate"`
	Took     string `json:"took"`
}

// LatencyStatus is the body of GET /v1/latency.
type LatencyStatus struct {
	Update       uint64    `json:"update"`
	Values       int       `json:"values"`
	Prefixes     int       `json:"prefixes"`
	Networks     int       `json:"networks"`
	LastUpdate   time.Time `json:"last_update,omitempty"`
	LastSource   string    `json:"last_source,omitempty"`
	Files        []string  `json:"files,omitempty"`
	HalfLife     string    `json:"half_life"`
	MaxAge       string    `json:"max_age"`
	SwitchRounds int       `json:"switch_rounds"`
	Margin       float64   `json:"switch_margin"`
	// RUM is the real-user measurements' part (nil: rum not configured).
	RUM *RUMStatus `json:"rum,omitempty"`
}

// RUMStatus is RUM's part of the latency map: the map's values that come
// from real users and their share, how RUM is blended, and the beacon
// store.
type RUMStatus struct {
	Listen     string  `json:"listen"`
	Values     int     `json:"values"` // real-user (network, site) values in the map
	Share      float64 `json:"share"`  // Values / all values of the map
	Weight     float64 `json:"weight"` // RUM's weight against probes
	Quantile   string  `json:"quantile"`
	MinSamples float64 `json:"min_samples"`
	Interval   string  `json:"interval"`
	Blocks     int     `json:"blocks"`
	MaxBlocks  int     `json:"max_blocks"`
	Cells      int     `json:"cells"`
	Accepted   uint64  `json:"accepted"`
	Evictions  uint64  `json:"evictions"`
	Rounds     uint64  `json:"rounds"` // feeds into the map so far
}

// latencyFormat picks the push format from the Content-Type: text/csv is
// CSV, anything else (application/json, or none) JSON.
func latencyFormat(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return LatencyJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", fmt.Errorf("bad Content-Type %q", ct)
	}
	switch mt {
	case "application/json":
		return LatencyJSON, nil
	case "text/csv":
		return LatencyCSV, nil
	}
	return "", fmt.Errorf("Content-Type %q is neither application/json nor text/csv", mt)
}

// postLatency applies one batch of measurements: all of it or, on any bad
// entry, none (400 naming the entry).
func (s *server) postLatency(w http.ResponseWriter, r *http.Request) {
	format, err := latencyFormat(r)
	if err != nil {
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	res, err := s.b.PushLatency(format, r.Body)
	if err != nil {
		var mb *http.MaxBytesError
		switch {
		case errors.As(err, &mb):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes: split the batch", mb.Limit))
		case errors.Is(err, ErrBadInput):
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		s.log.Warn("admin API: latency push rejected", "remote", r.RemoteAddr, "err", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) getLatency(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.b.LatencyStatus())
}
