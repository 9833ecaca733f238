// Command notices writes THIRD_PARTY_NOTICES: every module linked into the
// steer binary (go list -deps ./cmd/steer, so test-only modules, which are
// not distributed, are left out), its version, the licence detected from
// the LICENSE (or COPYING) file in the module cache, and the text of that
// file and of any NOTICE file, as the licences require in a binary
// distribution.
//
//	go run ./scripts/notices        # print
//	go run ./scripts/notices -w     # rewrite THIRD_PARTY_NOTICES
//
// A module whose licence it cannot name fails, so a new dependency is
// looked at before it ships. The test in this package fails when the file
// in the repository is not what this writes (a dependency added or
// upgraded in go.mod without regenerating it).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// File is the notices file, relative to the module root.
const File = "THIRD_PARTY_NOTICES"

func main() {
	write := flag.Bool("w", false, "rewrite "+File+" at the module root instead of printing")
	flag.Parse()
	root, err := moduleRoot()
	if err == nil {
		var out []byte
		if out, err = Generate(root); err == nil {
			if *write {
				err = os.WriteFile(filepath.Join(root, File), out, 0o644)
			} else {
				_, err = os.Stdout.Write(out)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "notices:", err)
		os.Exit(1)
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Module is one linked module.
type Module struct {
	Path, Version, Dir string
	Replace            *Module
}

// Modules lists the modules the steer binary links, sorted by path.
func Modules(root string) ([]Module, error) {
	cmd := exec.Command("go", "list", "-deps", "-json=Module", "./cmd/steer")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps ./cmd/steer: %v: %s", err, stderr.String())
	}
	seen := map[string]Module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ Module *Module }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		m := p.Module
		if m == nil || m.Version == "" { // the standard library; steer itself
			continue
		}
		if m.Replace != nil {
			m = &Module{Path: m.Path, Version: m.Replace.Version, Dir: m.Replace.Dir}
		}
		seen[m.Path] = *m
	}
	ms := make([]Module, 0, len(seen))
	for _, m := range seen {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Path < ms[j].Path })
	return ms, nil
}

// licenceFiles are the names looked for at a module's root, in order.
func licenceFiles(dir string) (licences, notices []string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := strings.ToUpper(e.Name())
		if e.IsDir() {
			// A licenses/ directory holds the texts a LICENSE file
			// refers to (golang/freetype's ftl.txt and gpl.txt).
			if n == "LICENSES" {
				sub, _ := os.ReadDir(filepath.Join(dir, e.Name()))
				for _, f := range sub {
					if !f.IsDir() {
						licences = append(licences, e.Name()+"/"+f.Name())
					}
				}
			}
			continue
		}
		switch {
		case strings.HasPrefix(n, "LICENSE"), strings.HasPrefix(n, "LICENCE"), strings.HasPrefix(n, "COPYING"):
			licences = append(licences, e.Name())
		case strings.HasPrefix(n, "NOTICE"):
			notices = append(notices, e.Name())
		}
	}
	return licences, notices
}

// Detect names the licence(s) of a licence text by their standard wording,
// as SPDX identifiers joined by " AND " ("" when none is recognised).
func Detect(text string) string {
	t := strings.Join(strings.Fields(text), " ") // line breaks vary
	var ids []string
	has := func(s string) bool { return strings.Contains(t, s) }
	if has("Apache License") && has("Version 2.0") {
		ids = append(ids, "Apache-2.0")
	}
	if has("Mozilla Public License") && has("2.0") {
		ids = append(ids, "MPL-2.0")
	}
	if has("Permission is hereby granted, free of charge") {
		ids = append(ids, "MIT")
	}
	if has("Permission to use, copy, modify, and/or distribute this software") || has("Permission to use, copy, modify, and distribute this software for any purpose with or without fee") {
		ids = append(ids, "ISC")
	}
	if has("Creative Commons Attribution 4.0 International") {
		ids = append(ids, "CC-BY-4.0")
	}
	if has("The FreeType License") {
		if has("GNU General Public License (GPL), version 2 or later") {
			ids = append(ids, "FTL OR GPL-2.0-or-later")
		} else {
			ids = append(ids, "FTL")
		}
	}
	if has("CC0 1.0 Universal") {
		ids = append(ids, "CC0-1.0")
	}
	if has("Redistribution and use in source and binary forms") {
		switch {
		case has("Neither the name") || has("names of its contributors may be used") || has("name of the copyright holder nor"):
			ids = append(ids, "BSD-3-Clause")
		default:
			ids = append(ids, "BSD-2-Clause")
		}
	}
	return strings.Join(ids, " AND ")
}

// Embedded are third-party data compiled into steer beside the modules:
// its name, licence, what it is, and the licence texts to reproduce
// (relative to the module root).
var Embedded = []struct {
	Name, Licence, What string
	Files               []string
}{
	{
		Name: "world-atlas 2.0.2 (npm)", Licence: "ISC",
		What: "The dashboard's world map (internal/ui/assets/land.js) is drawn from\n" +
			"Natural Earth's 1:110m land (public domain, naturalearthdata.com) as\n" +
			"world-atlas 2.0.2 packages it, under the ISC licence below\n" +
			"(internal/ui/mapdata/SOURCE.md).",
		Files: []string{"internal/ui/mapdata/LICENSE-world-atlas.txt"},
	},
}

// Generate returns the notices file for the module at root.
func Generate(root string) ([]byte, error) {
	ms, err := Modules(root)
	if err != nil {
		return nil, err
	}
	var head, body bytes.Buffer
	head.WriteString(`Third-party software linked into steer
======================================

Generated by "go run ./scripts/notices -w" from go.mod (the modules the
steer binary links); do not edit. steer itself is under the Apache License
2.0 (LICENSE). The embedded geo database is ip-location-db's
iptoasn-country database under the PDDL-1.0
(internal/geo/embedded/SOURCE.md, LICENSE-PDDL.txt).

`)
	fmt.Fprintf(&head, "%-62s %-40s %s\n", "module", "version", "licence")
	var unknown, credits []string
	for _, m := range ms {
		lics, nots := licenceFiles(m.Dir)
		if len(lics) == 0 {
			unknown = append(unknown, m.Path+" "+m.Version+": no LICENSE or COPYING file in "+m.Dir)
			continue
		}
		var ids []string
		fmt.Fprintf(&body, "\n\n==== %s %s ====\n", m.Path, m.Version)
		for _, name := range append(lics, nots...) {
			b, err := os.ReadFile(filepath.Join(m.Dir, name))
			if err != nil {
				return nil, err
			}
			if !utf8.Valid(b) { // ISO 8859-1 (freetype's ftl.txt): each byte is its code point
				r := make([]rune, len(b))
				for i, c := range b {
					r[i] = rune(c)
				}
				b = []byte(string(r))
			}
			for _, id := range strings.Split(Detect(string(b)), " AND ") {
				if id != "" && !contains(ids, id) {
					ids = append(ids, id)
				}
			}
			fmt.Fprintf(&body, "\n---- %s ----\n\n%s\n", name, strings.TrimRight(string(b), "\n \t"))
		}
		if len(ids) == 0 {
			unknown = append(unknown, m.Path+" "+m.Version+": licence not recognised in "+strings.Join(lics, ", "))
			continue
		}
		fmt.Fprintf(&head, "%-62s %-40s %s\n", m.Path, m.Version, strings.Join(ids, " AND "))
		for _, id := range ids {
			if strings.HasPrefix(id, "FTL") {
				// The FreeType License asks for this credit in the
				// documentation; steer takes the FTL of the choice.
				credits = append(credits, fmt.Sprintf("%s (under the FreeType License): Portions of this software are copyright © %s The FreeType Project (www.freetype.org). All rights reserved.", m.Path, versionYear(m.Version)))
			}
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("licence not determined (review it, then teach Detect):\n  %s", strings.Join(unknown, "\n  "))
	}
	for _, c := range credits {
		fmt.Fprintf(&head, "\n%s\n", c)
	}
	for _, e := range Embedded {
		fmt.Fprintf(&head, "\n%s\n", e.What)
		fmt.Fprintf(&body, "\n\n==== %s ====\n", e.Name)
		for _, name := range e.Files {
			b, err := os.ReadFile(filepath.Join(root, name))
			if err != nil {
				return nil, err
			}
			if got := Detect(string(b)); got != e.Licence {
				return nil, fmt.Errorf("%s: licence %q, want %q", name, got, e.Licence)
			}
			fmt.Fprintf(&body, "\n---- %s ----\n\n%s\n", name, strings.TrimRight(string(b), "\n \t"))
		}
	}
	head.Write(body.Bytes())
	return head.Bytes(), nil
}

// versionYear is the year of a module version: a pseudo-version's
// timestamp (v0.0.0-20170609003504-...), else "" when it has none.
func versionYear(v string) string {
	parts := strings.Split(v, "-")
	for _, p := range parts {
		if len(p) == 14 && strings.Trim(p, "0123456789") == "" {
			return p[:4]
		}
	}
	return ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
