package redact

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
