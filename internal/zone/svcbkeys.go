package zone

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// svcbKeys returns data with the generic SvcParamKeys of SVCB and HTTPS
// records that miekg/dns refuses written the way Knot, NSD and PowerDNS
// read them: keyNNNNN with leading zeros (key00997=) becomes key997=, and
// the generic form of a registered key (key01) its name (alpn). RFC 9460
// §2.1 writes keyNNNNN without leading zeros, but zones in use (PowerDNS's
// own test data) have them, and the number is plain. Nothing else changes,
// least of all a line break: every error and record keeps its line. It is
// data itself when there is nothing to rewrite, which is found without a
// scan unless the text holds "key0" at all. Files read by $INCLUDE are
// parsed as they are.
func svcbKeys(data []byte) []byte {
	if !bytes.Contains(data, []byte("key0")) {
		return data
	}
	var out []byte // nil until the first rewrite
	done := 0      // data[:done] is in out
	scanTokens(data, 0, func(e entry, toks []token) bool {
		for _, tk := range svcbParams(data, toks, e.owner) {
			t := tk.text(data)
			if !bytes.HasPrefix(t, []byte("key0")) {
				continue
			}
			end := 3
			for end < len(t) && t[end] >= '0' && t[end] <= '9' {
				end++
			}
			if end < len(t) && t[end] != '=' {
				continue // not a key (nor one with a value)
			}
			n, err := strconv.ParseUint(string(t[3:end]), 10, 16)
			if err != nil || n == 65535 {
				continue // the parser says why
			}
			key := dns.SVCBKey(n).String() // "alpn", or "key997"
			if out == nil {
				out = make([]byte, 0, len(data))
			}
			out = append(out, data[done:tk.start]...)
			out = append(out, key...)
			done = tk.start + end
		}
		return true
	})
	if out == nil {
		return data
	}
	return append(out, data[done:]...)
}

// svcbParams returns the SvcParam tokens of an entry that is an SVCB or
// HTTPS record, and nil for any other entry.
func svcbParams(data []byte, toks []token, owner bool) []token {
	// [owner] [TTL] [class] type rdata; TTL and class in either order.
	i := 0
	if owner {
		if directive(toks[0].text(data)) != "" {
			return nil
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
		return nil
	}
	if t := toks[i].text(data); !bytes.EqualFold(t, []byte("SVCB")) && !bytes.EqualFold(t, []byte("HTTPS")) {
		return nil
	}
	return toks[min(i+3, len(toks)):] // after the type, priority and target
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
