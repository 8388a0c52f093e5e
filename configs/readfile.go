package configs

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/fenced-project/fenced/internal/boundedfile"
)

// Size limits of the files fenced reads. A file over its limit is refused
// with an error naming it, after reading at most the limit and one byte, so
// /dev/zero or a runaway file cannot exhaust memory.
const (
	// MaxConfigBytes bounds the configuration file.
	MaxConfigBytes = 4 << 20
	// MaxSecretBytes bounds a secret file (token, password).
	MaxSecretBytes = 64 << 10
	// MaxPEMBytes bounds a certificate, key or CA bundle.
	MaxPEMBytes = 4 << 20
	// MaxAuxBytes bounds other inputs (CHAP secrets, kubeconfigs).
	MaxAuxBytes = 16 << 20
)

// ReadFileLimited reads the file at path when it holds at most limit bytes.
func ReadFileLimited(path string, limit int64) ([]byte, error) {
	return boundedfile.Read(path, limit)
}

// ReadSecretFile reads a one-line secret (API token, array password) the
// same way everywhere: one trailing newline (LF or CRLF) is dropped and
// nothing else; a secret that is empty or still holds a line break (a blank
// line after it, two lines) is refused, so that a file that validates is
// the secret that is sent. Errors name the file, never its content.
func ReadSecretFile(path string) (string, error) {
	b, err := ReadFileLimited(path, MaxSecretBytes)
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	switch {
	case s == "":
		return "", fmt.Errorf("secret file %s is empty", path)
	case strings.ContainsAny(s, "\r\n"):
		return "", fmt.Errorf("secret file %s holds more than one line (a blank line after the secret?): write the secret on one line, with at most one newline after it", path)
	}
	return s, nil
}

// LoadX509KeyPair is tls.LoadX509KeyPair with each file read through
// ReadFileLimited (MaxPEMBytes): a certificate or key path that names
// /dev/zero or a huge file is refused with an error naming the file and
// the bound instead of exhausting memory.
func LoadX509KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := ReadFileLimited(certFile, MaxPEMBytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := ReadFileLimited(keyFile, MaxPEMBytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}
