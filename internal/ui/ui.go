// Package ui is the dashboard: the web pages served at /ui on the admin
// API's listener. Its assets are embedded (no CDN, no build step); the
// pages read the API's JSON endpoints (/v1/overview, /v1/records/NAME,
// /v1/fleet, /v1/explain, /v1/simulate, /v1/events) with the session
// cookie the login form sets.
//
// SEAM (issue 28): the shell below serves the assets; the ui-shell
// helper adds the login, session cookie, CSRF and the API's cookie
// authentication.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Assets are the dashboard's files (index.html, *.js, *.css, the map).
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}

// Handler serves the dashboard under /ui/.
func Handler() http.Handler {
	files := http.FileServerFS(Assets())
	return http.StripPrefix("/ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || r.URL.Path == "/" {
			http.ServeFileFS(w, r, Assets(), "index.html")
			return
		}
		files.ServeHTTP(w, r)
	}))
}
