package geo

import "math"

// Distance is the great-circle distance in kilometres between two points
// given in degrees (haversine, mean Earth radius). Geoproximity steering and
// the latency estimate both use it.
func Distance(lat1, lon1, lat2, lon2 float64) float64 {
	const earthRadiusKm = 6371.0088
	rad := math.Pi / 180
	dLat := (lat2 - lat1) * rad
	dLon := (lon2 - lon1) * rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) +
		math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(a)))
}
