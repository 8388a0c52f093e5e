package powerstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/dell/gopowerstore"
)

// PowerStoreChapPlaceholderUser is the CHAP user of an initiator an
// unfence puts back on the node's host. csi-powerstore's node plugin
// chooses a new CHAP secret at every start and sets it on the host that
// has the node's initiators (dell/csi-powerstore pkg/node/base.go
// getNodeOptions, pkg/node/node.go setupHost); nobody else holds it, so
// fenced cannot give a CHAP initiator back with the secret the node logs
// in with. It puts the initiator back under this user with a random
// secret it keeps nowhere, which no node can log in with, so that the
// node plugin finds its host by the initiator at its next start and sets
// its own credentials on it (while the host keeps the node ID as its name
// and none of the initiators, the node plugin's registration of a new
// host by that name is refused). The restore is read back only once the
// initiator carries another user: the node plugin's.
const PowerStoreChapPlaceholderUser = "fenced-awaiting-node-plugin"

// psChap reports whether the initiator logged in with CHAP before the
// fence.
func psChap(in psInitiator) bool { return in.ChapSingleUsername != "" || in.ChapMutualUsername != "" }

// psPlaceholderSecret is a CHAP secret no one holds: 32 hex characters
// (PowerStore takes 12 to 64), kept nowhere.
func psPlaceholderSecret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random CHAP secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// psPlaceholder is how an unfence puts a CHAP initiator back: under
// PowerStoreChapPlaceholderUser with a secret no one holds, single CHAP
// only (the node plugin sets single CHAP only).
func psPlaceholder(in psInitiator) (gopowerstore.InitiatorCreateModify, error) {
	secret, err := psPlaceholderSecret()
	if err != nil {
		return gopowerstore.InitiatorCreateModify{}, err
	}
	pn, pt, user := in.PortName, gopowerstore.InitiatorProtocolTypeEnum(in.PortType), PowerStoreChapPlaceholderUser
	return gopowerstore.InitiatorCreateModify{PortName: &pn, PortType: &pt, ChapSingleUsername: &user, ChapSinglePassword: &secret}, nil
}

// psChapRestored checks a CHAP initiator of the plan that the host has
// again: it is restored once it carries CHAP credentials other than
// fenced's placeholder, those the node plugin set at its start. It
// returns why not otherwise.
func psChapRestored(want psInitiator, got gopowerstore.InitiatorInstance, hostName string) (bool, string) {
	switch got.ChapSingleUsername {
	case "", PowerStoreChapPlaceholderUser:
		return false, fmt.Sprintf("%s on host %s: waiting for the CSI node plugin to set its own CHAP secret on it "+
			"(csi-powerstore's node plugin does so when it starts: restart its pod on the node if it started before the unfence)",
			want, hostName)
	}
	return true, ""
}
