package arrayclients

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// External (NAT) access entries. csi-powerstore (X_CSI_POWERSTORE_EXTERNAL_ACCESS,
// pkg/controller/publisher.go) and csi-vxflexos (ExternalAccess) add a
// configured address or subnet to an NFS export's host lists beside the
// node's own IP on every publish. The node reaches the export through that
// entry as well (behind the NAT), and the entry is no node's: removing the
// node's IP, which is all a fence can do per node, leaves it a way in, and
// the next publish adds the entry again anyway. fenced cannot see which
// entries these are on the array; the array's configuration
// (Config.ExternalAccess) names them, and an export of a footprint volume
// that lists one is a gap (GapExternalAccess).

// ParseExternalAccess parses configured external-access entries: IPv4 or
// IPv6 addresses or CIDR subnets. An error names the entry.
func ParseExternalAccess(entries []string) ([]*net.IPNet, error) {
	out := make([]*net.IPNet, 0, len(entries))
	for i, e := range entries {
		n, ok := parseHostNet(e)
		if !ok {
			return nil, fmt.Errorf("externalAccess[%d]: %q is not an IP address or a CIDR subnet", i, e)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseHostNet reads an address, an address with a prefix length
// ("10.1.0.0/16") or with a dotted mask ("10.1.0.0/255.255.0.0", the form
// arrays list host entries in) as a network.
func parseHostNet(s string) (*net.IPNet, bool) {
	addr, mask, hasMask := strings.Cut(strings.TrimSpace(s), "/")
	ip := net.ParseIP(addr)
	if ip == nil {
		return nil, false
	}
	bits := 128
	if ip.To4() != nil {
		ip, bits = ip.To4(), 32
	}
	ones := bits
	if hasMask {
		var err error
		if ones, err = strconv.Atoi(mask); err != nil {
			m := net.ParseIP(mask)
			if m == nil {
				return nil, false
			}
			if m.To4() != nil {
				m = m.To4()
			}
			var sz int
			if ones, sz = net.IPMask(m).Size(); sz != bits {
				return nil, false
			}
		}
		if ones < 0 || ones > bits {
			return nil, false
		}
	}
	m := net.CIDRMask(ones, bits)
	return &net.IPNet{IP: ip.Mask(m), Mask: m}, true
}

// externalAccessEntries returns the export host entries that name a
// configured external-access address or subnet (the same address, or
// networks that overlap).
func externalAccessEntries(configured []string, entries []string) []string {
	nets, err := ParseExternalAccess(configured)
	if err != nil || len(nets) == 0 {
		return nil // refused when the adapter was made
	}
	var out []string
	for _, e := range entries {
		n, ok := parseHostNet(e)
		if !ok {
			continue
		}
		for _, c := range nets {
			if c.Contains(n.IP) || n.Contains(c.IP) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// ExternalAccessGap is the gap of an NFS footprint volume whose export
// lists a configured external-access entry, or nil.
func ExternalAccessGap(f Family, array string, configured []string, v VolumeRef, entries []string) *Gap {
	found := externalAccessEntries(configured, entries)
	if len(found) == 0 {
		return nil
	}
	setting := "X_CSI_POWERSTORE_EXTERNAL_ACCESS"
	if f == PowerFlex {
		setting = "the driver's externalAccess"
	}
	return &Gap{Reason: GapExternalAccess, Detail: fmt.Sprintf("%s: the NFS export on %s lists %s, configured as external "+
		"(NAT) access (%s): the driver adds it beside the node's IP on every publish, and the node can mount through it, so "+
		"removing the node's IP cannot cut it", v.Volume, array, strings.Join(found, ", "), setting)}
}
