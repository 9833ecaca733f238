package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/steer-dns/steer/internal/rum"
)

// RUMReportBackend is implemented by a Backend that keeps real-user
// measurements; NewHandler then serves GET /v1/rum/report.
type RUMReportBackend interface {
	// RUMReport compares what users measured with what the policy of
	// record chooses ("": the one record steered by latency, or the one
	// steered record). ErrNotFound when no beacon listener is configured
	// or the record is unknown; ErrBadInput when record must be named or
	// an option is out of range.
	RUMReport(record string, o rum.ReportOptions) (*rum.Report, error)
}

// rumReportParams are the query parameters of GET /v1/rum/report that
// set an option: each is a number; absent takes the node's setting.
var rumReportParams = []struct {
	name string
	set  func(o *rum.ReportOptions, v float64)
}{
	{"country_factor", func(o *rum.ReportOptions, v float64) { o.CountryFactor = v }},
	{"neighbour_km", func(o *rum.ReportOptions, v float64) { o.NeighbourKm = v }},
	{"margin", func(o *rum.ReportOptions, v float64) { o.Margin = v }},
	{"min_count", func(o *rum.ReportOptions, v float64) { o.MinCount = v }},
}

func (s *server) rumRoutes() {
	rb, ok := s.b.(RUMReportBackend)
	if !ok {
		return
	}
	s.mux.HandleFunc("GET /v1/rum/report", func(w http.ResponseWriter, r *http.Request) { s.rumReport(rb, w, r) })
}

// rumReport serves GET /v1/rum/report?name=RECORD&country_factor=1.5...
func (s *server) rumReport(rb RUMReportBackend, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var o rum.ReportOptions
	for _, p := range rumReportParams {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s %q is not a number", p.name, v))
			return
		}
		if f == 0 {
			// Zero would mean "the default": say it is out of range.
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s 0 is out of range", p.name))
			return
		}
		p.set(&o, f)
	}
	rep, err := rb.RUMReport(q.Get("name"), o)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrBadInput):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}
