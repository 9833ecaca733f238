package simulate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPoisson: the sampler's mean and variance match the Poisson's on
// each of its three methods.
func TestPoisson(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, mu := range []float64{0.05, 0.7, 2.9, 5, 11.9, 12, 40, 3000} {
		const n = 200000
		var s, s2 float64
		for range n {
			x := poisson(r, mu)
			s += x
			s2 += x * x
		}
		mean := s / n
		v := s2/n - mean*mean
		if se := math.Sqrt(mu / n); math.Abs(mean-mu) > 5*se {
			t.Errorf("mu %g: mean %g", mu, mean)
		}
		if math.Abs(v-mu)/mu > 0.03 {
			t.Errorf("mu %g: variance %g", mu, v)
		}
	}
}

// TestStratSource: deciding once per stratum gives a split its weights
// exactly (to one stratum), whether Uint64N multiplies or masks.
func TestStratSource(t *testing.T) {
	src := &stratSource{}
	r := rand.New(src)
	for _, n := range []uint64{2, 20, 100, 1024, 3} {
		counts := make([]int, n)
		for i := range strata {
			src.i = uint64(i)
			counts[r.Uint64N(n)]++
		}
		for v, c := range counts {
			if want := float64(strata) / float64(n); math.Abs(float64(c)-want) > 1 {
				t.Errorf("Uint64N(%d) = %d in %d strata of %d, want %.1f", n, v, c, strata, want)
			}
		}
	}
}
