package powerstore_test

import (
	"context"
	"testing"

	"github.com/dell/gopowerstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
)

// TestModifyInitiatorsChap: modify_initiators, as csi-powerstore's node
// plugin sends it at every start, replaces an initiator's CHAP
// credentials, kept per initiator and never read back; what the array
// refuses changes nothing.
func TestModifyInitiatorsChap(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h, err := e.client.GetHostByName(ctx, nodeHostName(e.nodes[0]))
	require.NoError(t, err)
	iqn, fc := "iqn.1994-05.com.redhat:worker-1", ""
	for _, in := range h.Initiators {
		if in.PortType == gopowerstore.InitiatorProtocolTypeEnumFC {
			fc = in.PortName
		}
	}
	require.NotEmpty(t, fc)
	user, secret := "admin", "0123456789abcdef01234567"
	mod := func(port string, u, s *string) error {
		m := []gopowerstore.UpdateInitiatorInHost{{PortName: &port, ChapSingleUsername: u, ChapSinglePassword: s}}
		_, err := e.client.ModifyHost(ctx, &gopowerstore.HostModify{ModifyInitiators: &m}, h.ID)
		return err
	}
	chapOf := func(port string) powerstore.InitiatorState {
		for _, hs := range e.sim.State().Hosts {
			for _, in := range hs.Initiators {
				if in.PortName == port {
					return in
				}
			}
		}
		t.Fatalf("no initiator %s", port)
		return powerstore.InitiatorState{}
	}

	before := e.dump(t)
	for name, err := range map[string]error{
		"a port the host does not have": mod("iqn.1994-05.com.redhat:worker-2", &user, &secret),
		"a user without a secret":       mod(iqn, &user, nil),
		"CHAP on FC":                    mod(fc, &user, &secret),
	} {
		assert.Equal(t, 400, apiStatus(t, err), name)
	}
	assert.Equal(t, before, e.dump(t), "a refused PATCH changes nothing")

	require.NoError(t, mod(iqn, &user, &secret))
	in := chapOf(iqn)
	assert.Equal(t, user, in.ChapSingleUsername)
	assert.Equal(t, powerstore.SecretFingerprint(secret), in.ChapSingleSecret)
	h, err = e.client.GetHost(ctx, h.ID)
	require.NoError(t, err)
	for _, got := range h.Initiators {
		if got.PortName == iqn {
			assert.Equal(t, user, got.ChapSingleUsername, "the user is read back, the secret never")
		}
	}

	// The next start replaces the secret.
	next := "fedcba9876543210fedcba98"
	require.NoError(t, mod(iqn, &user, &next))
	assert.Equal(t, powerstore.SecretFingerprint(next), chapOf(iqn).ChapSingleSecret)
}
