package presign_test

import (
	"testing"
	"time"

	"github.com/steer-dns/steer/internal/presign"
)

// TestSignatureTimes: the table reports, for the zone whose steered sets
// it signed, the first refresh point and expiration among them — the
// first-made set's, for a table whose sets were signed at two times.
func TestSignatureTimes(t *testing.T) {
	s, _ := signer(t)
	at := time.Now()
	clock := func() time.Time { return at }
	tb, err := presign.Build(presign.Options{Policies: table(t), Signer: onlyExampleCom(s), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	type times struct{ refresh, expire uint32 }
	got := map[string]times{}
	tb.SignatureTimes(func(z string, r, e uint32) { got[z] = times{r, e} })
	first, ok := got["example.com."]
	if len(got) != 1 || !ok {
		t.Fatalf("zones %v", got)
	}
	o := s.Options()
	if exp := at.Add(o.Validity); first.expire > uint32(exp.Unix()) || first.expire < uint32(exp.Add(-time.Duration(float64(o.Validity)*o.Jitter)).Unix())-1 {
		t.Fatalf("earliest expiry %v", time.Unix(int64(first.expire), 0))
	}
	if first.refresh <= uint32(at.Unix()) || first.refresh >= first.expire {
		t.Fatalf("earliest refresh %v (expiry %v)", time.Unix(int64(first.refresh), 0), time.Unix(int64(first.expire), 0))
	}
	// Signed again a day later, the sets not yet due are kept: the
	// earliest times stay those of the first signing.
	at = at.Add(24 * time.Hour)
	again, err := presign.Build(presign.Options{Policies: table(t), Signer: onlyExampleCom(s), Previous: tb, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	again.SignatureTimes(func(z string, r, e uint32) { got[z] = times{r, e} })
	if got["example.com."] != first {
		t.Fatalf("after a day: %+v, want %+v", got["example.com."], first)
	}
	var nilTable *presign.Table
	nilTable.SignatureTimes(func(string, uint32, uint32) { t.Fatal("a nil table yields") })
}
