package config

import (
	"crypto/sha256"
	"unsafe"
)

// Text returns the configuration's text as it was parsed (the dashboard
// shows a record's lines from it, as Line numbers them).
func (c *Config) Text() string { return c.text }

// dropText takes the digest of the text parsed, and lets the text go
// when nothing reads it again: no records to show or to reuse.
func (c *Config) dropText() {
	c.textSum = sha256.Sum256(unsafe.Slice(unsafe.StringData(c.text), len(c.text))) // read only
	if len(c.Records) == 0 {
		c.text = ""
	}
}
