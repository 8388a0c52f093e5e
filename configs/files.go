package configs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CredentialPrefix marks a file reference as a systemd credential:
// "credential:NAME" names the file NAME in $CREDENTIALS_DIRECTORY.
const CredentialPrefix = "credential:"

// CredentialUnitPrefix is what the shipped unit's
// LoadCredential=fenced:/etc/fenced/credentials prepends to the name of each
// file of that directory. credential:NAME finds "fenced_NAME" too.
const CredentialUnitPrefix = "fenced_"

// ErrNoCredentialsDir is returned when a credential:NAME reference is
// resolved without a credentials directory.
var ErrNoCredentialsDir = errors.New("credential reference, but no credentials directory ($CREDENTIALS_DIRECTORY is not set)")

// IsCredential reports whether ref is a credential:NAME reference.
func IsCredential(ref string) bool { return strings.HasPrefix(ref, CredentialPrefix) }

// credentialName checks and returns NAME of credential:NAME.
func credentialName(ref string) (string, error) {
	name := strings.TrimPrefix(ref, CredentialPrefix)
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("invalid credential name %q: want a plain file name", name)
	}
	return name, nil
}

// ResolveFile turns a file reference from the configuration into a path.
// credential:NAME becomes credDir/NAME, or credDir/fenced_NAME when only that
// exists (the name the shipped unit gives files it loads from
// /etc/fenced/credentials). Plain paths were made absolute by Load and are
// returned as they are.
func ResolveFile(ref, credDir string) (string, error) {
	if !IsCredential(ref) {
		return ref, nil
	}
	name, err := credentialName(ref)
	if err != nil {
		return "", err
	}
	if credDir == "" {
		return "", ErrNoCredentialsDir
	}
	p := filepath.Join(credDir, name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	alt := filepath.Join(credDir, CredentialUnitPrefix+name)
	if _, err := os.Stat(alt); err == nil {
		return alt, nil
	}
	return p, nil
}

// checkFile reports why path cannot be used as an input file, or nil.
// Messages never include the file's content.
func checkFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("file %s does not exist", path)
	case err != nil:
		return fmt.Errorf("file %s: %w", path, errors.Unwrap(err))
	case st.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("file %s cannot be opened: %w", path, errors.Unwrap(err))
	}
	return f.Close()
}

// readSecretFile resolves ref and reads it with ReadSecretFile.
func readSecretFile(ref, credDir string) (string, error) {
	p, err := ResolveFile(ref, credDir)
	if err != nil {
		return "", err
	}
	return ReadSecretFile(p)
}

// fileRef is one file-reference field of the configuration.
type fileRef struct {
	path     string  // field path, e.g. arrays[2].passwordFile
	ref      *string // the field
	required bool    // the field must be set
}

// fileRefs lists every file-reference field.
func (c *Config) fileRefs() []fileRef {
	refs := []fileRef{
		{path: "replica.tls.certFile", ref: &c.Replica.TLS.CertFile},
		{path: "replica.tls.keyFile", ref: &c.Replica.TLS.KeyFile},
		{path: "replica.tls.caFile", ref: &c.Replica.TLS.CAFile},
		{path: "http.tls.certFile", ref: &c.HTTP.TLS.CertFile},
		{path: "http.tls.keyFile", ref: &c.HTTP.TLS.KeyFile},
		{path: "http.tls.clientCAFile", ref: &c.HTTP.TLS.ClientCAFile},
		{path: "http.tls.operatorCAFile", ref: &c.HTTP.TLS.OperatorCAFile},
		{path: "http.tokenFile", ref: &c.HTTP.TokenFile},
	}
	for i := range c.Clusters {
		refs = append(refs, fileRef{path: fmt.Sprintf("clusters[%d].kubeconfig", i), ref: &c.Clusters[i].Kubeconfig, required: true})
	}
	for i := range c.Arrays {
		a := &c.Arrays[i]
		refs = append(refs,
			fileRef{path: fmt.Sprintf("arrays[%d].passwordFile", i), ref: &a.PasswordFile},
			fileRef{path: fmt.Sprintf("arrays[%d].caFile", i), ref: &a.CAFile},
			fileRef{path: fmt.Sprintf("arrays[%d].powerstore.chapSecretsFile", i), ref: &a.PowerStore.ChapSecretsFile},
		)
	}
	return refs
}

// absolutize makes relative plain paths relative to baseDir.
func (c *Config) absolutize(baseDir string) {
	for _, f := range c.fileRefs() {
		if *f.ref != "" && !IsCredential(*f.ref) && !filepath.IsAbs(*f.ref) && baseDir != "" {
			*f.ref = filepath.Join(baseDir, *f.ref)
		}
	}
}
