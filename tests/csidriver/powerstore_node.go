package csidriver

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/dell/gopowerstore"
)

// PowerStoreChapUser is the CHAP user csi-powerstore's node plugin sets
// on a node's iSCSI initiators when CHAP is enabled
// (dell/csi-powerstore pkg/node/base.go getNodeOptions).
const PowerStoreChapUser = "admin"

// PowerStoreNode is what csi-powerstore's node plugin on one node sends
// the array when it starts.
type PowerStoreNode struct {
	// NodeID is the node's CSI node ID, <prefix>-<machine ID>-<IP>
	// (pkg/node/node.go updateNodeID).
	NodeID string
	// Initiators are the node's port names of the protocol the driver
	// uses on the array, all of PortType.
	Initiators []string
	PortType   gopowerstore.InitiatorProtocolTypeEnum
	// CHAP is X_CSI_POWERSTORE_ENABLE_CHAP.
	CHAP bool
}

// PowerStoreNodeStart is what one start of the node plugin left.
type PowerStoreNodeStart struct {
	// Secret is the CHAP secret the node plugin chose at this start and
	// gave the node's iSCSI initiator to log in with ("" without CHAP).
	Secret string
	// HostID is the host that has the node's initiators ("" when the
	// setup failed).
	HostID string
}

// chapSecret is the node plugin's CHAP secret: 12 random bytes in hex,
// 24 characters (pkg/node/base.go getNodeOptions calls
// identifiers.RandomString(12), pkg/identifiers/identifiers.go).
func chapSecret() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random CHAP secret: %w", err)
	}
	return fmt.Sprintf("%x", b), nil
}

// NodeStart does what csi-powerstore's node plugin does on the array when
// it starts (dell/csi-powerstore pkg/node/node.go Init, setupHost): with
// CHAP enabled it chooses a new secret for user "admin" at every start
// (pkg/node/base.go getNodeOptions), which the node's iSCSI initiator
// logs in with from then on. It lists the hosts and looks for one with
// any of the node's initiators (same port name and type):
//
//   - none: it creates a host named by the node ID with the initiators
//     and the CHAP credentials (createHost, registerHost). The array
//     refuses a name in use, so a node whose host is still there without
//     its initiators is not registered; the driver logs the error and
//     starts without a host (Init), which is returned here with the
//     secret the node now holds;
//   - one: with CHAP it sets the credentials on the host's initiators
//     (modifyHostInitiators with modify_initiators,
//     buildInitiatorsArrayModify), then renames the host to the node ID
//     (modifyHostName; setupHost compares the node ID with the host's ID,
//     so the rename is always sent).
//
// FC initiators get no CHAP (buildInitiatorsArray).
func (p *PowerStore) NodeStart(ctx context.Context, n PowerStoreNode) (PowerStoreNodeStart, error) {
	var out PowerStoreNodeStart
	fail := func(err error) (PowerStoreNodeStart, error) {
		return out, fmt.Errorf("emulated %s node plugin of %s: set up host: %w", p.cfg.Driver, n.NodeID, err)
	}
	chap := n.CHAP && n.PortType != gopowerstore.InitiatorProtocolTypeEnumFC
	if chap {
		s, err := chapSecret()
		if err != nil {
			return fail(err)
		}
		out.Secret = s
	}
	user, secret := PowerStoreChapUser, out.Secret
	hosts, err := p.c.GetHosts(ctx)
	if err != nil {
		return fail(fmt.Errorf("failed getting hosts: %w", err))
	}
	want := map[string]bool{}
	for _, in := range n.Initiators {
		want[in] = true
	}
	var existing *gopowerstore.Host
	for i := range hosts {
		for _, in := range hosts[i].Initiators {
			if want[in.PortName] && in.PortType == n.PortType {
				existing = &hosts[i]
				break
			}
		}
		if existing != nil {
			break
		}
	}
	if existing == nil {
		reg := make([]gopowerstore.InitiatorCreateModify, 0, len(n.Initiators))
		for _, pn := range n.Initiators {
			m := gopowerstore.InitiatorCreateModify{PortName: &pn, PortType: &n.PortType}
			if chap {
				m.ChapSingleUsername, m.ChapSinglePassword = &user, &secret
			}
			reg = append(reg, m)
		}
		id, err := p.RegisterNode(ctx, n.NodeID, reg)
		if err != nil {
			return fail(err)
		}
		out.HostID = id
		return out, nil
	}
	if chap {
		mods := make([]gopowerstore.UpdateInitiatorInHost, 0, len(n.Initiators))
		for _, pn := range n.Initiators {
			mods = append(mods, gopowerstore.UpdateInitiatorInHost{PortName: &pn, ChapSingleUsername: &user, ChapSinglePassword: &secret})
		}
		if _, err := p.c.ModifyHost(ctx, &gopowerstore.HostModify{ModifyInitiators: &mods}, existing.ID); err != nil {
			return fail(fmt.Errorf("failed to update CHAP: failed to modify initiators: %w", err))
		}
	}
	name := n.NodeID
	if _, err := p.c.ModifyHost(ctx, &gopowerstore.HostModify{Name: &name}, existing.ID); err != nil {
		return fail(fmt.Errorf("failed to update host name: %w", err))
	}
	out.HostID = existing.ID
	return out, nil
}
