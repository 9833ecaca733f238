package simulate

import (
	"math"
	"math/rand/v2"
	"slices"
)

// poisson draws a Poisson variate of mean mu from r: by counting unit
// exponential gaps for a mean below 3, by inversion (one uniform, a walk
// up the cumulative distribution) up to 12, and
// by Hörmann's transformed rejection with squeeze (PTRS, "The transformed
// rejection method for generating Poisson random variables", 1993) for a
// large one, which takes about one pair of uniforms whatever the mean.
// Neither allocates.
func poisson(r *rand.Rand, mu float64) float64 {
	switch {
	case mu <= 0:
		return 0
	case mu < 3:
		// Count the arrivals of a unit-rate Poisson process before mu:
		// a few cheap exponentials, no math.Exp.
		k := 0.0
		for s := r.ExpFloat64(); s < mu; s += r.ExpFloat64() {
			k++
		}
		return k
	case mu < 12:
		u := r.Float64()
		p := math.Exp(-mu)
		c := p
		k := 0.0
		for u > c {
			k++
			p *= mu / k
			c += p
			if p < 1e-300 { // rounding left the tail unreachable
				break
			}
		}
		return k
	}
	slam := math.Sqrt(mu)
	loglam := math.NaN() // taken on the slow path only
	b := 0.931 + 2.53*slam
	a := -0.059 + 0.02483*b
	invalpha := 1.1239 + 1.1328/(b-3.4)
	vr := 0.9277 - 3.6224/(b-2)
	for {
		u := r.Float64() - 0.5
		v := r.Float64()
		us := 0.5 - math.Abs(u)
		k := math.Floor((2*a/us+b)*u + mu + 0.43)
		if us >= 0.07 && v <= vr {
			return k
		}
		if k < 0 || (us < 0.013 && v > us) {
			continue
		}
		if math.IsNaN(loglam) {
			loglam = math.Log(mu)
		}
		lg, _ := math.Lgamma(k + 1)
		if math.Log(v)+math.Log(invalpha)-math.Log(a/(us*us)+b) <= -mu+k*loglam-lg {
			return k
		}
	}
}

// strata is the number of stratified draws the configured share takes
// per random decision.
const strata = 1024

// stratSource is a rand.Source whose i-th value lies in the middle of
// the i-th of 1,024 equal strata of [0, 2⁶⁴) and whose low ten bits are
// i itself: rand.Rand.Uint64N(n) takes either the high word of value×n
// (n not a power of two: each outcome gets its share of the strata, to
// within one) or value mod n (a power of two up to 1,024: exactly its
// share). Deciding once per stratum gives a split's weights without
// sampling noise.
type stratSource struct{ i uint64 }

func (s *stratSource) Uint64() uint64 {
	v := s.i<<54 | 1<<53 | s.i&(strata-1)
	s.i++
	return v
}

// countSource counts the values drawn from it: a decision that draws
// none does not depend on the random source.
type countSource struct {
	src rand.Source
	n   int
}

func (c *countSource) Uint64() uint64 {
	c.n++
	return c.src.Uint64()
}

// percentile returns the p-quantile (0..1) of sorted xs, interpolating
// between order statistics; 0 for none.
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	h := p * float64(n-1)
	i := int(h)
	if i >= n-1 {
		return sorted[n-1]
	}
	return sorted[i] + (h-float64(i))*(sorted[i+1]-sorted[i])
}

// band returns the 5th, 50th and 95th percentiles and the mean of xs
// (which it sorts).
func band(xs []float64) Band {
	if len(xs) == 0 {
		return Band{}
	}
	slices.Sort(xs)
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Band{P5: percentile(xs, 0.05), P50: percentile(xs, 0.5), P95: percentile(xs, 0.95), Mean: sum / float64(len(xs))}
}
