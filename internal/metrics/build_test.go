package metrics

import (
	"fmt"
	"testing"

	"github.com/steer-dns/steer/internal/version"
)

func TestBuildInfo(t *testing.T) {
	bi := version.Get()
	expect(t, scrape(t, newM()), fmt.Sprintf("steer_build_info{commit=%q,goversion=%q,version=%q} 1", bi.Commit, bi.GoVersion, bi.Version))
}
