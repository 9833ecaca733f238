// Package difftest holds the differential test that serves other
// projects' own test zones (PowerDNS's regression tests and BIND's system
// tests, in ../shared/testdata/peer-zones beside the repository) from
// steer, Knot DNS and NSD side by side, asks all three the same questions
// and compares the answers. It has no code outside its tests; see
// diff_test.go for what it compares and allowed_test.go for the
// differences the RFCs leave room for.
package difftest
