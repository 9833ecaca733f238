package snapshot

// SetPackMin sets the fewest changed copies kept as a new pack, until
// the returned function restores it.
func SetPackMin(n int) (restore func()) {
	old := packMin
	packMin = n
	return func() { packMin = old }
}

// PackName is the pack's file name in a cache directory.
const PackName = packName
