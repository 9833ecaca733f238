package ui

// The world map's land path, from Natural Earth via world-atlas (see
// internal/ui/mapdata).
//go:generate go run ./mapdata/gen -in mapdata/land-110m.json -out assets/land.js
