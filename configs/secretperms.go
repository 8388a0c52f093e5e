package configs

import (
	"io/fs"
	"os"
	"strings"
)

// ExposedSecretFile is a file holding a secret that users other than its
// owner may read.
type ExposedSecretFile struct {
	// Field is the configuration field naming the file, e.g.
	// arrays[2].passwordFile.
	Field string
	// Path is the file's path.
	Path string
	// Mode is the file's permission bits.
	Mode fs.FileMode
}

// ExposedSecretFiles returns the secret-bearing files of the configuration
// (private keys, the API token, kubeconfigs, array passwords and CHAP
// secrets) that are readable or writable by group or others. Files that do
// not exist are skipped (validation reports them). The daemon warns about
// each; systemd credentials are handed over with mode 0400 and never show up.
func (c *Config) ExposedSecretFiles(credDir string) []ExposedSecretFile {
	var out []ExposedSecretFile
	for _, f := range c.fileRefs() {
		if *f.ref == "" || !holdsSecret(f.path) {
			continue
		}
		p, err := ResolveFile(*f.ref, credDir)
		if err != nil {
			continue
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if st.Mode().Perm()&0o077 != 0 {
			out = append(out, ExposedSecretFile{Field: f.path, Path: p, Mode: st.Mode().Perm()})
		}
	}
	return out
}

// holdsSecret reports whether a file-reference field names a secret (CA
// certificates and certificates are public).
func holdsSecret(field string) bool {
	for _, suffix := range []string{".keyFile", ".tokenFile", ".kubeconfig", ".passwordFile", ".chapSecretsFile"} {
		if strings.HasSuffix(field, suffix) {
			return true
		}
	}
	return false
}
