package configs

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const planted = "PLANTED-pw-7f3a9c"

// TestSecretsNeverInProblems plants a password wherever a confused file
// might put one and checks no problem message repeats it.
func TestSecretsNeverInProblems(t *testing.T) {
	dir := fixtureDir(t)
	valid := string(render(validYAML, dir))
	pwLine := "    passwordFile: " + dir + "/pw\n"
	for name, doc := range map[string]string{
		"inline, not allowed":     strings.Replace(valid, pwLine, "    password: "+planted+"\n", 1),
		"inline and a file":       "allowInlineSecrets: true\n" + strings.Replace(valid, pwLine, pwLine+"    password: "+planted+"\n", 1),
		"misspelled key":          strings.Replace(valid, pwLine, "    passwrd: "+planted+"\n", 1),
		"password as a list":      strings.Replace(valid, pwLine, "    password: ["+planted+"]\n", 1),
		"password as a mapping":   strings.Replace(valid, pwLine, "    password: {"+planted+": x}\n", 1),
		"password at top level":   valid + "password: " + planted + "\n",
		"token in the http block": valid + "http:\n  token: " + planted + "\n",
		"password breaks yaml":    strings.Replace(valid, pwLine, "    password: "+planted+"\n  - [\n", 1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc), dir, Options{})
			require.Error(t, err)
			assert.NotContains(t, err.Error(), planted)
			assert.NotContains(t, fmt.Sprintf("%+v %#v", err, err), planted)
		})
	}
}

// TestSecretTypeHides checks an inline password never prints, logs or
// encodes itself.
func TestSecretTypeHides(t *testing.T) {
	dir := fixtureDir(t)
	doc := "allowInlineSecrets: true\n" + strings.Replace(string(render(validYAML, dir)), "    passwordFile: "+dir+"/pw\n", "    password: "+planted+"\n", 1)
	cfg, err := Parse([]byte(doc), dir, Options{})
	require.NoError(t, err)
	require.Equal(t, planted, cfg.Arrays[0].Password.Reveal())

	var b strings.Builder
	fmt.Fprintf(&b, "%v %+v %#v %s", cfg, *cfg, cfg.Arrays[0], cfg.Arrays[0].Password)
	js, err := json.Marshal(cfg)
	require.NoError(t, err)
	b.Write(js)
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "arrays", cfg.Arrays, "pw", cfg.Arrays[0].Password)
	slog.New(slog.NewJSONHandler(&b, nil)).Info("config", "array", cfg.Arrays[0], "pw", cfg.Arrays[0].Password)
	assert.NotContains(t, b.String(), planted)
	assert.Contains(t, b.String(), "[REDACTED]")
	assert.Contains(t, cfg.Secrets(""), planted, "Secrets lists it for the log redactor")
}

// TestSecretFileErrorsNameTheFileOnly checks errors reading secret files
// carry no content.
func TestSecretFileErrorsNameTheFileOnly(t *testing.T) {
	dir := t.TempDir()
	chap := filepath.Join(dir, "chap")
	require.NoError(t, os.WriteFile(chap, []byte("iqn.x: [\n"+planted+"\n"), 0o600))
	a := Array{Name: "p", PasswordFile: filepath.Join(dir, "nope"), PowerStore: PowerStoreOptions{ChapSecretsFile: chap}}
	_, err := a.ClientConfig("")
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "nope"))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "nope"), []byte(planted+"\n"), 0o600))
	_, err = a.ClientConfig("")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), planted)
}
