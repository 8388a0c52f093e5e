package kube

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/fenced-project/fenced/internal/boundedfile"
)

// Size bounds of the kubeconfig and of the files it names. client-go reads
// them whole; CheckKubeconfigFiles refuses a larger one (or /dev/zero)
// first, naming the file and the bound.
const (
	// MaxKubeconfigBytes bounds a kubeconfig file.
	MaxKubeconfigBytes = 16 << 20
	// MaxKubeconfigRefBytes bounds a file a kubeconfig names: a CA bundle,
	// client certificate, client key or token file.
	MaxKubeconfigRefBytes = 4 << 20
)

// CheckKubeconfigFiles reads the kubeconfig at path with a size bound and
// checks the size of every file it names (certificate-authority,
// client-certificate, client-key, tokenFile; relative paths resolved
// against the kubeconfig's directory), so that client-go, which reads them
// whole, never reads an unbounded one.
func CheckKubeconfigFiles(path string) error {
	b, err := boundedfile.Read(path, MaxKubeconfigBytes)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	check := func(what, name, ref string) error {
		if ref == "" {
			return nil
		}
		if !filepath.IsAbs(ref) {
			ref = filepath.Join(dir, ref)
		}
		if _, err := boundedfile.Read(ref, MaxKubeconfigRefBytes); err != nil {
			return fmt.Errorf("kubeconfig %s: %s of %q: %w", path, what, name, err)
		}
		return nil
	}
	for name, c := range cfg.Clusters {
		if err := check("certificate-authority", name, c.CertificateAuthority); err != nil {
			return err
		}
	}
	for name, u := range cfg.AuthInfos {
		for _, f := range []struct{ what, ref string }{
			{"client-certificate", u.ClientCertificate},
			{"client-key", u.ClientKey},
			{"tokenFile", u.TokenFile},
		} {
			if err := check(f.what, name, f.ref); err != nil {
				return err
			}
		}
	}
	return nil
}
