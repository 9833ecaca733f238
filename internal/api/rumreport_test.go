package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/steer-dns/steer/internal/rum"
)

// fakeRUM is a Backend with real-user measurements for one record.
type fakeRUM struct {
	fake
	got []rum.ReportOptions
}

func (f *fakeRUM) RUMReport(record string, o rum.ReportOptions) (*rum.Report, error) {
	if record != "" && record != "www.example.com" {
		return nil, fmt.Errorf("%s is not a steered record: %w", record, ErrNotFound)
	}
	f.got = append(f.got, o)
	rep, err := rum.BuildReport(rum.ReportInput{Record: "www.example.com."}, o)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	return rep, nil
}

// GET /v1/rum/report needs the token, passes the options on, and names
// a bad parameter or record.
func TestRUMReportEndpoint(t *testing.T) {
	f := &fakeRUM{}
	h := NewHandler(f, Options{Token: "secret"})
	auth := []string{"Authorization", "Bearer secret"}
	if w := do(t, h, "GET", "/v1/rum/report", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", w.Code)
	}
	w := do(t, h, "GET", "/v1/rum/report?country_factor=2.5&min_count=10", "", auth...)
	var rep rum.Report
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &rep) != nil || rep.Record != "www.example.com." || rep.Options.CountryFactor != 2.5 || rep.Options.MinCount != 10 {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	if len(f.got) != 1 || f.got[0].CountryFactor != 2.5 || f.got[0].NeighbourKm != 0 {
		t.Errorf("options passed: %+v, want country_factor 2.5 and the rest unset", f.got)
	}
	for _, tt := range []struct{ query, want string }{
		{"country_factor=big", `country_factor "big" is not a number`},
		{"margin=0", "margin 0 is out of range"},
		{"country_factor=0.5", "country_factor 0.5: want a number > 1"},
		{"neighbour_km=-3", "neighbour_km -3"},
	} {
		if msg := jsonError(t, do(t, h, "GET", "/v1/rum/report?"+tt.query, "", auth...), http.StatusBadRequest); !strings.Contains(msg, tt.want) {
			t.Errorf("%s: %q, want %q", tt.query, msg, tt.want)
		}
	}
	if msg := jsonError(t, do(t, h, "GET", "/v1/rum/report?name=www.exmaple.com", "", auth...), http.StatusNotFound); !strings.Contains(msg, "www.exmaple.com") {
		t.Errorf("unknown record: %q", msg)
	}
	// A backend without measurements serves no such route.
	if w := do(t, NewHandler(&fake{}, Options{}), "GET", "/v1/rum/report", ""); w.Code != http.StatusNotFound {
		t.Errorf("no RUM backend: %d", w.Code)
	}
}
