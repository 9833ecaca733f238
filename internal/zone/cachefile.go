package zone

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// CacheFile returns the name of the file, in a cache directory, that holds
// the last good copy of the zone origin (canonical): the origin without
// its final dot plus ".zone" ("example.com.zone"; "root.zone" for the
// root). Every byte other than a-z, 0-9, '-', '_' and '.' is written %XX,
// so the name is safe in a directory and no two origins share one.
func CacheFile(origin string) string {
	var name string
	switch origin {
	case ".", "":
		name = "root"
	case "root.":
		name = "%72oot" // "root" is the root zone's
	default:
		var b strings.Builder
		b.Grow(len(origin) + len(".zone"))
		for i := 0; i < len(origin)-1; i++ {
			c := origin[i]
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
				b.WriteByte(c)
			default:
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		name = b.String()
	}
	if len(name) > 200 {
		// Too long for a file name: a digest ('%' then a non-hex letter
		// never comes out of the escaping above).
		sum := sha256.Sum256([]byte(origin))
		name = "%sha256-" + hex.EncodeToString(sum[:])
	}
	return name + ".zone"
}
