package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedactionOfDerivedForms: a credential is hidden in the forms a client
// sends it, and any Authorization header's value is hidden even when the
// secret was never registered.
func TestRedactionOfDerivedForms(t *testing.T) {
	red := New()
	red.AddCredential("admin", "Pass:word+/1")
	basic := base64.StdEncoding.EncodeToString([]byte("admin:Pass:word+/1"))
	for _, in := range []string{
		"echo: Authorization: Basic " + basic,
		`{"headers":{"Authorization":["Basic ` + basic + `"]}}`,
		"basic%20" + basic,
		"raw " + basic + " in a body",
		"urlsafe " + base64.URLEncoding.EncodeToString([]byte("admin:Pass:word+/1")),
		"password only " + base64.StdEncoding.EncodeToString([]byte("Pass:word+/1")),
		"Pass:word+/1",
	} {
		out := red.Redact(in)
		assert.NotContains(t, out, basic, in)
		assert.NotContains(t, out, "Pass:word+/1", in)
		assert.Contains(t, out, Redacted, in)
	}
	for _, in := range []string{
		"Authorization: Bearer some-unregistered-token",
		"DELL-EMC-TOKEN: abcdef0123456789",
		"authorization=Negotiate YIIabcdefg",
	} {
		out := red.Redact(in)
		assert.Contains(t, out, Redacted, in)
		assert.NotContains(t, out, "unregistered-token")
		assert.NotContains(t, out, "abcdef0123456789")
		assert.NotContains(t, out, "YIIabcdefg")
	}
	assert.Equal(t, "basic health check", red.Redact("basic health check"), "ordinary words stay")
	long := strings.Repeat("x", 1000)
	assert.Len(t, red.Trim(long, 100), 100+len("…"))
}

func TestAddIgnoresShortAndRepeated(t *testing.T) {
	red := New()
	red.Add("", "ab", "s3cret", "s3cret")
	assert.Len(t, red.secrets, 1)
	assert.Equal(t, "x "+Redacted+" ab", red.Redact("x s3cret ab"))
}

// TestRedactionOfEscapedForms: a secret with characters that escape is
// hidden in the forms programs write it in: JSON (Go's, without HTML
// escapes, ASCII-only as Python writes it, "\/"), Go quoting and slog's
// text and JSON handlers, URL query and path encoding (either hex case),
// and HTML entities.
func TestRedactionOfEscapedForms(t *testing.T) {
	secrets := []string{
		`pa"ss\word&<x>+ y%2F/é密`,
		`a b+c%d/e`,
		`<tok&en>`,
		`naïve"quote`,
		`emoji🔑key`,
	}
	red := New()
	red.Add(secrets...)
	for _, sec := range secrets {
		jsonBody, err := json.Marshal(map[string]string{"message": "bad login " + sec})
		require.NoError(t, err)
		var noHTML strings.Builder
		enc := json.NewEncoder(&noHTML)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(map[string]string{"message": sec}))
		var slogText, slogJSON strings.Builder
		slog.New(slog.NewTextHandler(&slogText, nil)).Info("login", "body", "x="+sec)
		slog.New(slog.NewJSONHandler(&slogJSON, nil)).Info("login", "body", sec)
		forms := map[string]string{
			"json":            string(jsonBody),
			"json no html":    noHTML.String(),
			"json ascii":      pythonJSON(sec),
			"json slash":      strings.ReplaceAll(string(jsonBody), "/", `\/`),
			"go quote":        strconv.Quote(sec),
			"go quote ascii":  strconv.QuoteToASCII(sec),
			"errorf q":        fmt.Sprintf("login failed: %q", sec),
			"slog text":       slogText.String(),
			"slog json":       slogJSON.String(),
			"url query":       "https://a/b?pw=" + url.QueryEscape(sec) + "&x=1",
			"url query %20":   "?p=" + strings.ReplaceAll(url.QueryEscape(sec), "+", "%20"),
			"url query lower": "?p=" + regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(sec), strings.ToLower),
			"url path":        "https://a/" + url.PathEscape(sec) + "/x",
			"url values":      url.Values{"pw": {sec}}.Encode(),
			"html":            "<p>" + html.EscapeString(sec) + "</p>",
			"html named":      "<p>" + strings.ReplaceAll(html.EscapeString(sec), "&#34;", "&quot;") + "</p>",
			"html hex":        strings.ReplaceAll(html.EscapeString(sec), "&#34;", "&#x22;"),
			"raw":             "x " + sec + " y",
		}
		for name, in := range forms {
			out := red.Redact(in)
			assert.Contains(t, out, Redacted, "%s: %s", name, in)
			for _, part := range strings.FieldsFunc(sec, func(r rune) bool { return strings.ContainsRune(`"\&<>+ %/`, r) }) {
				if len(part) >= 4 {
					assert.NotContains(t, out, part, "%s: %s -> %s", name, in, out)
				}
			}
		}
	}
	assert.Equal(t, "a < b & c", red.Redact("a < b & c"), "text without a secret stays")
}

// pythonJSON writes sec as a JSON object the way Python's json.dumps does
// by default: non-ASCII as lower-case \uXXXX, "/" left alone.
func pythonJSON(sec string) string {
	var sb strings.Builder
	sb.WriteString(`{"message": "`)
	for _, r := range sec {
		switch {
		case r == '"' || r == '\\':
			sb.WriteString(`\` + string(r))
		case r < 0x80:
			sb.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&sb, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&sb, `\u%04x`, r)
		}
	}
	sb.WriteString(`"}`)
	return sb.String()
}

// TestAuthPrefilter: the cheap check before the credential pattern lets
// through every text the pattern can match, whatever the case of its
// words, including through the non-ASCII letters Go's case folding maps
// onto ASCII ones; and text without those words is left as it is.
func TestAuthPrefilter(t *testing.T) {
	red := New()
	for in, want := range map[string]string{
		`{"error":"401: Authorization: Bearer abcdef123"}`: `{"error":"401: Authorization: ` + Redacted + `"}`,
		"BEARER abcd1234":             "BEARER " + Redacted,
		"cooKie=abcd1234":             "cooKie=" + Redacted, // Kelvin sign
		"baſic abcd1234":              "baſic " + Redacted,  // long s
		"X-Auth-Token: abcdefgh":      "X-Auth-Token: " + Redacted,
		`{"nodes":[{"name":"w-1"}]}`:  `{"nodes":[{"name":"w-1"}]}`,
		"basic health of the cluster": "basic health of the cluster",
	} {
		assert.Equal(t, want, red.Redact(in), in)
	}
	assert.False(t, mayHoldAuth(`{"nodes":[{"name":"w-1","state":"healthy"}]}`))
	assert.True(t, mayHoldAuth("naïve"), "non-ASCII text is always matched")
}

// FuzzAuthPrefilter: whenever the credential pattern matches, the
// prefilter lets the text through (it may only skip texts the pattern
// cannot match).
func FuzzAuthPrefilter(f *testing.F) {
	for _, s := range []string{"Bearer abcdefgh", "cooKie=abcd", "baſic abcd", `"authorization": "x y"`, "digest%20abcd", "plain text"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if authValue.MatchString(s) {
			require.True(t, mayHoldAuth(s), "%q matches the pattern but the prefilter skips it", s)
		}
	})
}
