// Command gen writes the dashboard's world map asset from its TopoJSON
// source (see package mapdata). go generate in internal/ui runs it:
//
//	go run ./mapdata/gen -in mapdata/land-110m.json -out assets/land.js
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/steer-dns/steer/internal/ui/mapdata"
)

func main() {
	in := flag.String("in", "mapdata/land-110m.json", "the TopoJSON source")
	out := flag.String("out", "assets/land.js", "the asset to write")
	flag.Parse()
	src, err := os.ReadFile(*in)
	if err == nil {
		var js []byte
		if js, err = mapdata.LandJS(src); err == nil {
			err = os.WriteFile(*out, js, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mapdata/gen:", err)
		os.Exit(1)
	}
}
