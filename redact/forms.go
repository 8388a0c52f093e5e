package redact

import (
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// escapedForms returns s and the forms it takes when a program embeds it
// in text: JSON string bodies (Go's encoder with and without its HTML
// escapes, ASCII-only "\\uXXXX" escapes, "\\/" for "/"), Go quoting
// (strconv.Quote, %q, and slog's text handler), URL encoding (query with
// "+" or "%20" for a space, path, upper- and lower-case hex) and HTML
// (Go's entities, named ones, and hexadecimal references). Forms equal to
// s are dropped by the caller's de-duplication.
func escapedForms(s string) []string {
	forms := []string{s}
	add := func(f string) {
		for _, have := range forms {
			if have == f {
				return
			}
		}
		forms = append(forms, f)
	}
	// JSON.
	for _, f := range jsonForms(s) {
		add(f)
		add(strings.ReplaceAll(f, "/", `\/`))
	}
	// Go quoting.
	add(unquote(strconv.Quote(s)))
	add(unquote(strconv.QuoteToASCII(s)))
	// URL.
	q := url.QueryEscape(s)
	for _, f := range []string{q, strings.ReplaceAll(q, "+", "%20"), url.PathEscape(s)} {
		add(f)
		add(lowerHex(f))
	}
	// HTML.
	h := html.EscapeString(s) // &lt; &gt; &amp; &#39; &#34;
	add(h)
	add(strings.NewReplacer("&#39;", "&apos;", "&#34;", "&quot;").Replace(h))
	add(strings.NewReplacer("&#39;", "&#x27;", "&#34;", "&#x22;").Replace(h))
	add(strings.NewReplacer("&#34;", "&quot;").Replace(h))
	return forms
}

// jsonForms returns the body of s as a JSON string, as Go's encoder writes
// it (escaping <, > and &) and without the HTML escapes, and with every
// non-ASCII character escaped (as Python's json.dumps does by default).
func jsonForms(s string) []string {
	var out []string
	b, err := json.Marshal(s)
	if err == nil {
		out = append(out, unquote(string(b)))
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		plain := unquote(strings.TrimSuffix(sb.String(), "\n"))
		out = append(out, plain, asciiJSON(plain), strings.ToLower(asciiJSON(plain)))
	}
	return out
}

// asciiJSON escapes every non-ASCII character of a JSON string body as
// \uXXXX (a surrogate pair above the BMP).
func asciiJSON(body string) string {
	var sb strings.Builder
	for _, r := range body {
		switch {
		case r < utf8.RuneSelf:
			sb.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&sb, `\u%04X\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&sb, `\u%04X`, r)
		}
	}
	return sb.String()
}

// lowerHex lower-cases the hex digits of every %XX escape.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = lowerByte(b[i+1])
			b[i+2] = lowerByte(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

func unquote(q string) string { return q[1 : len(q)-1] }
