package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpToDate fails when THIRD_PARTY_NOTICES is not what the generator
// writes for the current go.mod: a dependency added or upgraded without its
// notice.
func TestUpToDate(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, File))
	if err != nil {
		t.Fatalf("%v (run: go run ./scripts/notices -w)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s is out of date with go.mod (run: go run ./scripts/notices -w); first difference at line %d:\n have %q\n want %q", File, i+1, g, w)
			}
		}
	}
}

func TestDetect(t *testing.T) {
	for text, want := range map[string]string{
		"Apache License\n Version 2.0, January 2004":                                                               "Apache-2.0",
		"Permission is hereby granted, free of charge, to any person":                                              "MIT",
		"Redistribution and use in source and binary forms ... Neither the name of":                                "BSD-3-Clause",
		"Redistribution and use in source and binary forms, with or without\nmodification, are ...":                "BSD-2-Clause",
		"Permission to use, copy, modify, and/or distribute this software for any":                                 "ISC",
		"Mozilla Public License Version 2.0":                                                                       "MPL-2.0",
		"Creative Commons Legal Code\n\nCC0 1.0 Universal":                                                         "CC0-1.0",
		"Creative Commons Attribution 4.0 International Public License":                                            "CC-BY-4.0",
		"your choice of ... The FreeType License, ... or The GNU General Public License (GPL), version 2 or later": "FTL OR GPL-2.0-or-later",
		"All rights reserved.": "",
	} {
		if got := Detect(text); got != want {
			t.Errorf("Detect(%q) = %q, want %q", text, got, want)
		}
	}
}
