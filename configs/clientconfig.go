package configs

import (
	"fmt"
	"net"
	"net/url"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/arrayclients"
)

// ClientConfig returns what an arrayclients adapter needs for this array,
// with the password (and PowerStore CHAP secrets) read from their files.
// credDir resolves credential:NAME references (normally
// $CREDENTIALS_DIRECTORY). Errors name the array and file, never a secret.
func (a Array) ClientConfig(credDir string) (arrayclients.Config, error) {
	cc := arrayclients.Config{
		Name:                     a.Name,
		Family:                   a.Family,
		Endpoint:                 a.Endpoint,
		Username:                 a.Username,
		Insecure:                 a.Insecure,
		RequestTimeout:           a.RequestTimeout,
		SystemID:                 a.PowerFlex.SystemID,
		SystemName:               a.PowerFlex.SystemName,
		SymmetrixID:              a.PowerMax.SymmetrixID,
		PowerMaxClusterPrefix:    a.PowerMax.ClusterPrefix,
		PowerMaxNodeNameTemplate: a.PowerMax.NodeNameTemplate,
		PowerMaxVSphereHost:      a.PowerMax.VSphereHost,
		Zone:                     a.PowerScale.Zone,
		SessionAuth:              a.PowerScale.SessionAuth,
		PowerStoreFenceMode:      a.PowerStore.FenceMode,
		ArrayIDs:                 a.HandleIDs(),
		CSIDefault:               a.CSIDefault,
	}
	switch a.Family {
	case arrayclients.PowerFlex:
		cc.ExternalAccess = a.PowerFlex.ExternalAccess
	case arrayclients.PowerStore:
		cc.ExternalAccess = a.PowerStore.ExternalAccess
	}
	if cc.RequestTimeout == 0 {
		cc.RequestTimeout = arrayclients.DefaultRequestTimeout
	}
	switch {
	case a.PasswordFile != "":
		pw, err := readSecretFile(a.PasswordFile, credDir)
		if err != nil {
			return arrayclients.Config{}, fmt.Errorf("array %s: password: %w", a.Name, err)
		}
		cc.Password = pw
	case a.Password != "":
		cc.Password = a.Password.Reveal()
	default:
		return arrayclients.Config{}, fmt.Errorf("array %s: no password configured", a.Name)
	}
	if a.CAFile != "" {
		p, err := ResolveFile(a.CAFile, credDir)
		if err != nil {
			return arrayclients.Config{}, fmt.Errorf("array %s: caFile: %w", a.Name, err)
		}
		cc.CAFile = p
	}
	if a.PowerStore.ChapSecretsFile != "" {
		m, err := readChapSecrets(a.PowerStore.ChapSecretsFile, credDir)
		if err != nil {
			return arrayclients.Config{}, fmt.Errorf("array %s: chapSecretsFile: %w", a.Name, err)
		}
		cc.ChapSecrets = m
	}
	return cc, nil
}

// HandleIDs are the identifiers under which the family's CSI driver names
// this array in volume handles (arrayclients.Config.ArrayIDs).
func (a Array) HandleIDs() []string {
	var ids []string
	add := func(v string) {
		if v != "" && !slices.Contains(ids, v) {
			ids = append(ids, v)
		}
	}
	switch a.Family {
	case arrayclients.PowerFlex:
		add(a.PowerFlex.SystemID)
		add(a.PowerFlex.SystemName)
	case arrayclients.PowerStore:
		add(a.PowerStore.GlobalID)
		// Old csi-powerstore handles carry the management IP instead.
		if u, err := url.Parse(a.Endpoint); err == nil {
			if ip := net.ParseIP(u.Hostname()); ip != nil {
				add(ip.String())
			}
		}
	case arrayclients.PowerMax:
		add(a.PowerMax.SymmetrixID)
	case arrayclients.Unity:
		add(a.Unity.ArrayID)
	case arrayclients.PowerScale:
		add(a.PowerScale.ClusterName)
	}
	return ids
}

// readChapSecrets reads a YAML map of initiator port name to CHAP secret.
// A parse error is reported by line only: YAML errors can quote content.
func readChapSecrets(ref, credDir string) (map[string]string, error) {
	p, err := ResolveFile(ref, credDir)
	if err != nil {
		return nil, err
	}
	b, err := ReadFileLimited(p, MaxAuxBytes)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s is not valid YAML", p)
	}
	if len(doc.Content) == 0 {
		return map[string]string{}, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s (line %d): want a map of initiator name to CHAP secret", p, root.Line)
	}
	m := make(map[string]string, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || k.Value == "" || v.Value == "" {
			return nil, fmt.Errorf("%s (line %d): want \"initiator: secret\" with both non-empty", p, k.Line)
		}
		m[k.Value] = v.Value
	}
	return m, nil
}

// Secrets returns every secret the configuration holds inline or in files it
// names, so that a log redactor can hide them. Unreadable files are skipped
// (validation reports them).
func (c *Config) Secrets(credDir string) []string {
	var out []string
	for _, a := range c.Arrays {
		if a.Password != "" {
			out = append(out, a.Password.Reveal())
		}
		if a.PasswordFile != "" {
			if s, err := readSecretFile(a.PasswordFile, credDir); err == nil {
				out = append(out, s)
			}
		}
		if a.PowerStore.ChapSecretsFile != "" {
			if m, err := readChapSecrets(a.PowerStore.ChapSecretsFile, credDir); err == nil {
				for _, s := range m {
					out = append(out, s)
				}
			}
		}
	}
	if c.HTTP.TokenFile != "" {
		if s, err := readSecretFile(c.HTTP.TokenFile, credDir); err == nil {
			out = append(out, s)
		}
	}
	return out
}
