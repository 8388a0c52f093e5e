package pki

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/fenced-project/fenced/cluster/transport"
)

// ExpiryWarning is how close to its end a certificate's validity must be
// for Describe to warn: the same 30 days `fenced config validate` uses.
const ExpiryWarning = 30 * 24 * time.Hour

// Description is what an operator checks of a certificate before
// installing it.
type Description struct {
	Subject  string   `json:"subject"`
	Issuer   string   `json:"issuer"`
	Serial   string   `json:"serial"`
	IsCA     bool     `json:"isCA"`
	DNSNames []string `json:"dnsNames,omitempty"`
	IPs      []string `json:"ipAddresses,omitempty"`
	Emails   []string `json:"emailAddresses,omitempty"`
	URIs     []string `json:"uris,omitempty"`
	// Replicas are the replica IDs the certificate names (URI SANs
	// fenced://replica/<id>): the only names peers recognise.
	Replicas  []string  `json:"replicas,omitempty"`
	Usages    []string  `json:"extKeyUsages,omitempty"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	// Role says what fenced can use the certificate for, by its usages.
	Role string `json:"role"`
	// DaysLeft is the whole days until NotAfter (negative once expired).
	DaysLeft int `json:"daysLeft"`
	// TimeLeft says the time until NotAfter for people: days, or hours
	// and minutes under two days.
	TimeLeft string `json:"timeLeft"`
	// Warnings say what makes the certificate unusable now or soon.
	Warnings []string `json:"warnings,omitempty"`
}

// Describe describes cert as of now.
func Describe(cert *x509.Certificate, now time.Time) Description {
	d := Description{
		Subject:   cert.Subject.String(),
		Issuer:    cert.Issuer.String(),
		Serial:    fmt.Sprintf("%x", cert.SerialNumber),
		IsCA:      cert.IsCA,
		DNSNames:  cert.DNSNames,
		Emails:    cert.EmailAddresses,
		NotBefore: cert.NotBefore.UTC(),
		NotAfter:  cert.NotAfter.UTC(),
		DaysLeft:  int(cert.NotAfter.Sub(now).Hours() / 24),
		TimeLeft:  timeLeft(cert.NotAfter, now),
	}
	for _, ip := range cert.IPAddresses {
		d.IPs = append(d.IPs, ip.String())
	}
	for _, u := range cert.URIs {
		d.URIs = append(d.URIs, u.String())
	}
	d.Replicas = transport.NamedIDs(cert)
	for _, u := range cert.ExtKeyUsage {
		d.Usages = append(d.Usages, usageName(u))
	}
	switch {
	case now.After(cert.NotAfter):
		d.Warnings = append(d.Warnings, "expired on "+cert.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(cert.NotBefore):
		d.Warnings = append(d.Warnings, "not valid before "+cert.NotBefore.UTC().Format(time.RFC3339))
	case cert.NotAfter.Sub(now) < ExpiryWarning:
		d.Warnings = append(d.Warnings, fmt.Sprintf("expires in %d days (%s): renew it", d.DaysLeft, cert.NotAfter.UTC().Format(time.DateOnly)))
	}
	d.Role = role(cert)
	if !cert.IsCA && hasUsage(cert, x509.ExtKeyUsageServerAuth) && hasUsage(cert, x509.ExtKeyUsageClientAuth) && len(d.Replicas) == 0 {
		d.Warnings = append(d.Warnings, "names no replica by the URI SAN fenced://replica/<id>: peers refuse it as a replica "+
			"(a common name or DNS name is no replica identity); reissue it with `fenced pki replica --from-cert FILE`")
	}
	return d
}

// role says what fenced can use cert for.
func role(cert *x509.Certificate) string {
	if cert.IsCA {
		return "CA"
	}
	server, client := hasUsage(cert, x509.ExtKeyUsageServerAuth), hasUsage(cert, x509.ExtKeyUsageClientAuth)
	switch {
	case server && client:
		return "replica (serverAuth and clientAuth: Raft and HTTPS)"
	case client:
		return "operator (clientAuth only)"
	case server:
		return "HTTPS server only (no clientAuth: not usable for Raft or as an operator)"
	default:
		return "none (neither serverAuth nor clientAuth)"
	}
}

func hasUsage(cert *x509.Certificate, want x509.ExtKeyUsage) bool {
	for _, u := range cert.ExtKeyUsage {
		if u == want || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageAny:
		return "any"
	case x509.ExtKeyUsageCodeSigning:
		return "codeSigning"
	case x509.ExtKeyUsageEmailProtection:
		return "emailProtection"
	case x509.ExtKeyUsageTimeStamping:
		return "timeStamping"
	case x509.ExtKeyUsageOCSPSigning:
		return "ocspSigning"
	default:
		return fmt.Sprintf("usage(%d)", int(u))
	}
}

// timeLeft says how long until notAfter, from now: in days, or in hours
// (then minutes) under two days, where "0 days left" would hide a
// certificate expiring tomorrow.
func timeLeft(notAfter, now time.Time) string {
	left := notAfter.Sub(now)
	switch {
	case left <= 0:
		return "expired " + (-left).Round(time.Minute).String() + " ago"
	case left < time.Hour:
		return fmt.Sprintf("%d minutes left", int(left.Minutes()))
	case left < 48*time.Hour:
		return fmt.Sprintf("%d hours left", int(left.Hours()))
	}
	return fmt.Sprintf("%d days left", int(left.Hours()/24))
}
