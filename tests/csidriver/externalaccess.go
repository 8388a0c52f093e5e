package csidriver

import (
	"fmt"
	"net"
	"strings"
)

// externalAccessEntry is the export host entry both csi-vxflexos and
// csi-powerstore make of their external-access setting
// (X_CSI_POWERFLEX_EXTERNAL_ACCESS, X_CSI_POWERSTORE_EXTERNAL_ACCESS;
// ParseCIDR in dell/csi-powerflex service/service.go and dell/csi-powerstore
// pkg/identifiers/identifiers.go): a bare IP gets "/32", and the entry is
// the network's first address and its mask in dotted form, so
// "10.1.2.3" is "10.1.2.3/255.255.255.255" and "10.1.2.0/24" is
// "10.1.2.0/255.255.255.0". IPv4 only, as the simulators list hosts.
func externalAccessEntry(s string) (string, error) {
	in := strings.TrimSpace(s)
	if !strings.Contains(in, "/") {
		in += "/32"
	}
	_, n, err := net.ParseCIDR(in)
	if err != nil || n.IP.To4() == nil {
		return "", fmt.Errorf("external access %q is no IPv4 address or CIDR: %w", s, ErrInvalid)
	}
	m := n.Mask
	if len(m) == net.IPv6len {
		m = m[12:]
	}
	return fmt.Sprintf("%s/%d.%d.%d.%d", n.IP.To4(), m[0], m[1], m[2], m[3]), nil
}
