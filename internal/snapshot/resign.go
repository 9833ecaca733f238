package snapshot

import (
	"errors"
	"fmt"
	"time"

	"github.com/steer-dns/steer/internal/policy"
	"github.com/steer-dns/steer/internal/zone"
)

// Resigned returns a snapshot serving what s serves with the DNSSEC
// signatures due for renewal at now made anew, for the node's renewal
// timer: each signed zone's renewal step (zone.Zone.Resigned), which
// shares every node whose signatures are fresh, and the steered answer
// sets' table signed again when one of its sets is due (presign.Build
// keeps the fresh ones; those it signs count as "steered"); the
// configuration, the policies and their live state, and every other zone
// are s's. It reads no file: a pending edit of the configuration or a
// zone, or a key file gone, does not matter here. It returns s itself
// when nothing is due.
//
// A zone whose renewal fails keeps its signatures as served (they hold
// until they expire) and the error says which; the others are renewed.
// A new table is watching s.Live's health changes when Resigned returns
// (a caller that does not serve the snapshot returned must give the
// watch back: s.Presigned.Watch(s.Live)).
func (s *Snapshot) Resigned(now time.Time) (*Snapshot, error) {
	zones := s.Zones.Zones()
	out := make([]*zone.Zone, len(zones))
	var errs []error
	changed := false
	var expired []ZoneProblem
	for i, z := range zones {
		out[i] = z
		if presignedExpired(z, now) {
			// Signed elsewhere, and its signer has not renewed it in
			// time (no transfer, no new file): answered SERVFAIL from
			// now on, as a zone that failed to load, rather than with
			// signatures every validator rejects.
			f := zone.NewFailed(z.Origin, z.File, fmt.Sprintf("its signatures expired at %s (%s): the signer did not renew them in time",
				time.Unix(int64(z.PresignedExpiry()), 0).UTC().Format(time.RFC3339), z.PresignedSummary()))
			out[i], changed = f, true
			expired = append(expired, ZoneProblem{Origin: z.Origin, File: z.File, Problem: f.Failed, Serving: ServingServfail})
			continue
		}
		if z.Signer() == nil {
			continue
		}
		nz, err := z.Resigned(now, policy.Workers(true))
		if err != nil {
			errs = append(errs, fmt.Errorf("zone %s: renewing signatures: %w", z.Origin, err))
			continue
		}
		if nz != z {
			out[i], changed = nz, true
		}
	}
	due := false
	s.Presigned.SignatureTimes(func(_ string, refresh, _ uint32) {
		due = due || refresh <= uint32(now.Unix())
	})
	if !changed && !due {
		return s, errors.Join(errs...)
	}
	n := *s
	if len(expired) > 0 {
		n.Degraded = append(append([]ZoneProblem(nil), s.Degraded...), expired...)
	}
	if changed {
		n.Zones = zone.NewSet(out)
		n.Zones.PrecompileOn(policy.Workers(true))
		if s.marks != nil {
			n.marks = make(map[*zone.Zone][]*policy.Record, len(s.marks))
			for i, z := range zones {
				if recs, ok := s.marks[z]; ok {
					n.marks[out[i]] = recs
				}
			}
		}
	}
	if due && s.Signing != nil {
		t, err := presignSteered(s.Signing, n.Zones, s.Policies, s.Live, s, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("renewing the signatures of steered answers: %w", err))
			s.Presigned.Watch(s.Live) // the served table keeps its watch
		} else {
			n.Presigned = t
		}
	}
	if !changed && n.Presigned == s.Presigned {
		return s, errors.Join(errs...)
	}
	return &n, errors.Join(errs...)
}
