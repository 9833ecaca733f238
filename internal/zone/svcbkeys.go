package zone

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// svcbKeys returns data with the record data that miekg/dns refuses but
// Knot, NSD, BIND or PowerDNS read written the way miekg/dns reads it:
//   - the generic SvcParamKeys of SVCB and HTTPS records: keyNNNNN with
//     leading zeros (key00997=) becomes key997=: RFC 9460 §2.1 writes
//     keyNNNNN without leading zeros, but zones in use (PowerDNS's own
//     test data) have them, and the number is plain. A registered key in
//     generic form (key1="\002h2") holds its wire-format value; it is
//     written in the key's own form (alpn="h2");
//   - the NodeID and Locator64 of NID and L64 records (RFC 6742 §2.3)
//     with groups of fewer than four hex digits (0:0:0:1, as BIND's own
//     test zones write them, and NSD and BIND read) padded to four.
//
// Nothing else changes, least of all a line break: every error and record
// keeps its line. It is data itself when there is nothing to rewrite,
// which is found without a scan unless the text holds "key" and a digit,
// "NID" or "L64" (in either case) at all. Files read by $INCLUDE are parsed as
// they are.
func svcbKeys(data []byte) []byte {
	svcb := genericKey(data)
	nid := bytes.Contains(data, []byte("NID")) || bytes.Contains(data, []byte("nid")) ||
		bytes.Contains(data, []byte("L64")) || bytes.Contains(data, []byte("l64"))
	if !svcb && !nid {
		return data
	}
	var out []byte // nil until the first rewrite
	done := 0      // data[:done] is in out
	replace := func(start, end int, with string) {
		if out == nil {
			out = make([]byte, 0, len(data)+64)
		}
		out = append(out, data[done:start]...)
		out = append(out, with...)
		done = end
	}
	scanTokens(data, 0, func(e entry, toks []token) bool {
		typ, rdata := rdataTokens(data, toks, e.owner)
		switch {
		case svcb && (bytes.EqualFold(typ, []byte("SVCB")) || bytes.EqualFold(typ, []byte("HTTPS"))):
			for _, tk := range rdata[min(2, len(rdata)):] { // after the priority and target
				t := tk.text(data)
				if !bytes.HasPrefix(t, []byte("key")) {
					continue
				}
				end := 3
				for end < len(t) && t[end] >= '0' && t[end] <= '9' {
					end++
				}
				if end == 3 || end < len(t) && t[end] != '=' {
					continue // not a key (nor one with a value)
				}
				n, err := strconv.ParseUint(string(t[3:end]), 10, 16)
				if err != nil || n == 65535 {
					continue // the parser says why
				}
				key := dns.SVCBKey(n).String() // "alpn", or "key997"
				if !strings.HasPrefix(key, "key") {
					// A registered key in generic form: its value is
					// the wire form (RFC 9460 §2.1), read as the key's.
					if p, ok := registeredGeneric(dns.SVCBKey(n), t[end:]); ok {
						replace(tk.start, tk.end, p)
					}
					continue
				}
				if t[3] == '0' {
					replace(tk.start, tk.start+end, key)
				}
			}
		case nid && (bytes.EqualFold(typ, []byte("NID")) || bytes.EqualFold(typ, []byte("L64"))) && len(rdata) >= 2:
			tk := rdata[1] // after the preference
			if padded, ok := padGroups(tk.text(data)); ok {
				replace(tk.start, tk.start+len(tk.text(data)), padded)
			}
		}
		return true
	})
	if out == nil {
		return data
	}
	return append(out, data[done:]...)
}

// genericKey reports whether data may hold an SvcParamKey in generic form
// (key followed by a digit) at all.
func genericKey(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("key"))
		if j < 0 {
			return false
		}
		i += j + 3
		if i < len(data) && data[i] >= '0' && data[i] <= '9' {
			return true
		}
	}
}

// registeredGeneric reads rest ("" or "=value") as the wire-form value of
// the registered key k, written in generic form (key1="\002h2"), and
// returns the SvcParam in k's own presentation form (alpn="h2"); ok is
// false when the value does not decode as k's (the parser then says the
// key is bad).
func registeredGeneric(k dns.SVCBKey, rest []byte) (string, bool) {
	var wire []byte
	if len(rest) > 0 {
		v := rest[1:]
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		var ok bool
		if wire, ok = unescape(v); !ok {
			return "", false
		}
	}
	rr := &dns.SVCB{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSVCB, Class: dns.ClassINET}, Priority: 1, Target: ".",
		Value: []dns.SVCBKeyValue{&dns.SVCBLocal{KeyCode: k, Data: wire}}}
	buf := make([]byte, dns.Len(rr)+16)
	n, err := dns.PackRR(rr, buf, 0, nil, false)
	if err != nil {
		return "", false
	}
	back, _, err := dns.UnpackRR(buf[:n], 0)
	if err != nil {
		return "", false
	}
	s, ok := back.(*dns.SVCB)
	if !ok || len(s.Value) != 1 || s.Value[0].Key() != k {
		return "", false
	}
	v := s.Value[0].String()
	if v == "" {
		return k.String(), true
	}
	return k.String() + `="` + strings.ReplaceAll(v, `"`, `\"`) + `"`, true
}

// unescape reads the RFC 1035 §5.1 escapes of a character-string (\DDD
// and \X).
func unescape(v []byte) ([]byte, bool) {
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		if i+1 >= len(v) {
			return nil, false
		}
		if d := v[i+1]; d >= '0' && d <= '9' {
			if i+4 > len(v) {
				return nil, false
			}
			n, err := strconv.Atoi(string(v[i+1 : i+4]))
			if err != nil || n > 255 {
				return nil, false
			}
			out = append(out, byte(n))
			i += 3
			continue
		}
		out = append(out, v[i+1])
		i++
	}
	return out, true
}

// padGroups writes a NodeID or Locator64 of four colon-separated groups
// of one to four hex digits with four digits each; ok is false when t is
// not such a value or already has four digits in every group.
func padGroups(t []byte) (string, bool) {
	groups := bytes.Split(t, []byte(":"))
	if len(groups) != 4 {
		return "", false
	}
	short := false
	var b strings.Builder
	for i, g := range groups {
		if len(g) == 0 || len(g) > 4 {
			return "", false
		}
		for _, c := range g {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return "", false
			}
		}
		if i > 0 {
			b.WriteByte(':')
		}
		if len(g) < 4 {
			short = true
			b.WriteString(strings.Repeat("0", 4-len(g)))
		}
		b.Write(g)
	}
	return b.String(), short
}

// rdataTokens returns the type token and the rdata tokens of an entry
// that is a record, and nil for a directive.
func rdataTokens(data []byte, toks []token, owner bool) ([]byte, []token) {
	// [owner] [TTL] [class] type rdata; TTL and class in either order.
	i := 0
	if owner {
		if directive(toks[0].text(data)) != "" {
			return nil, nil
		}
		i = 1
	}
	for last := i + 2; i < len(toks) && i < last; i++ {
		t := toks[i].text(data)
		if !isTTL(t) && !isClass(t) {
			break
		}
	}
	if i >= len(toks) {
		return nil, nil
	}
	return toks[i].text(data), toks[i+1:]
}

// svcbParams returns the SvcParam tokens of an entry that is an SVCB or
// HTTPS record, and nil for any other entry.
func svcbParams(data []byte, toks []token, owner bool) []token {
	typ, rdata := rdataTokens(data, toks, owner)
	if !bytes.EqualFold(typ, []byte("SVCB")) && !bytes.EqualFold(typ, []byte("HTTPS")) {
		return nil
	}
	return rdata[min(2, len(rdata)):] // after the priority and target
}

// svcbKeyError makes miekg/dns's "bad SVCB key" error at line of data
// name the key, which it may not (it quotes the token it stopped at: a
// quote, for a quoted value).
func svcbKeyError(data []byte, line int, msg string) string {
	bad := ""
	at, lineOff := 1, 0 // the line of lineOff, as tokens go by
	scanTokens(data, 0, func(e entry, toks []token) bool {
		if e.line > line {
			return false // past it
		}
		for _, tk := range svcbParams(data, toks, e.owner) {
			at += bytes.Count(data[lineOff:tk.start], []byte{'\n'})
			lineOff = tk.start
			if at > line {
				return false
			}
			key, _, _ := bytes.Cut(tk.text(data), []byte("="))
			if at == line && !svcbKeyOK(string(key)) {
				bad = string(key)
				return false
			}
		}
		return true
	})
	if bad == "" {
		return msg
	}
	var names []string
	for k := dns.SVCBKey(0); k < 16; k++ {
		if s := k.String(); !strings.HasPrefix(s, "key") {
			names = append(names, s)
		}
	}
	return "bad SVCB key " + strconv.Quote(bad) + ": the keys read by name are " + strings.Join(names, ", ") +
		"; any other is written keyNNNNN, its number below 65535 (RFC 9460 §2.1)"
}

// svcbKeyOK reports whether miekg/dns reads key as a SvcParamKey.
func svcbKeyOK(key string) bool {
	for k := dns.SVCBKey(0); k < 16; k++ {
		if s := k.String(); s == key && !strings.HasPrefix(s, "key") {
			return true
		}
	}
	if !strings.HasPrefix(key, "key") || len(key) < 4 || key[3] == '0' {
		return false
	}
	n, err := strconv.ParseUint(key[3:], 10, 16)
	return err == nil && n != 65535 && strings.HasPrefix(dns.SVCBKey(n).String(), "key")
}

// isTTL reports whether t is a TTL as the parser reads one: digits, or
// BIND's units (1h30m).
func isTTL(t []byte) bool {
	if len(t) == 0 || t[0] < '0' || t[0] > '9' {
		return false
	}
	for _, c := range t {
		switch {
		case c >= '0' && c <= '9':
		case bytes.IndexByte([]byte("smhdwSMHDW"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isClass reports whether t names a class (IN, CH, CLASS3, ...).
func isClass(t []byte) bool {
	if _, ok := dns.StringToClass[string(bytes.ToUpper(t))]; ok {
		return true
	}
	return len(t) > 5 && bytes.EqualFold(t[:5], []byte("CLASS"))
}
