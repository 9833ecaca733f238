package config

// Text returns the configuration's text as it was parsed (the dashboard
// shows a record's lines from it, as Line numbers them).
func (c *Config) Text() string { return c.text }
