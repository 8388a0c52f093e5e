package kube

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestRequiredAccessIsTheManifest checks that what `fenced config
// validate --online` asks for is exactly what deploy/kubernetes/rbac.yaml
// grants: every required access is granted by a rule of the manifest (a
// ClusterRole, or a Role in the access's namespace), and every verb a rule
// grants is required.
func TestRequiredAccessIsTheManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "rbac.yaml"))
	require.NoError(t, err)
	type grant struct {
		rule      rbacv1.PolicyRule
		namespace string // "" for a ClusterRole
	}
	var grants []grant
	for i, doc := range strings.Split(string(b), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err, "document %d", i)
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			for _, r := range o.Rules {
				grants = append(grants, grant{rule: r})
			}
		case *rbacv1.Role:
			for _, r := range o.Rules {
				grants = append(grants, grant{rule: r, namespace: o.Namespace})
			}
		}
	}
	require.NotEmpty(t, grants)
	granted := func(a Access) bool {
		for _, g := range grants {
			if (g.namespace == "" || g.namespace == a.Namespace) && slices.Contains(g.rule.APIGroups, a.Group) &&
				slices.Contains(g.rule.Resources, a.Resource) && slices.Contains(g.rule.Verbs, a.Verb) {
				return true
			}
		}
		return false
	}
	required := RequiredAccess()
	for _, a := range required {
		assert.True(t, granted(a), "%s is required but the manifest does not grant it", a)
		assert.NotEmpty(t, a.Why, a.String())
	}
	for _, g := range grants {
		for _, group := range g.rule.APIGroups {
			for _, res := range g.rule.Resources {
				for _, verb := range g.rule.Verbs {
					assert.True(t, slices.ContainsFunc(required, func(a Access) bool {
						return a.Group == group && a.Resource == res && a.Verb == verb && a.Namespace == g.namespace
					}), "the manifest grants %s %s.%s (namespace %q) that fenced does not require", verb, res, group, g.namespace)
				}
			}
		}
	}
}
