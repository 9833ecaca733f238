package zone

import "time"

// SetClockForTest makes signatures made on demand start at now().
func SetClockForTest(now func() time.Time) (restore func()) {
	old := clock
	clock = now
	return func() { clock = old }
}
