//go:build integration

package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// The shapes of fleet the benchmark measures.
const (
	// shapeShared: every binding assigns saltstack/{minion} and
	// <prefix>_role_{pillar[roles]}, has two roles (r0..r9 and web), and the
	// template writes one policy document per role: 11 shared policies.
	shapeShared = "shared"
	// shapePerMinion: the same plus one policy document per minion,
	// <prefix>_minion_{minion}: N more policies.
	shapePerMinion = "perminion"
)

var allShapes = []string{shapeShared, shapePerMinion}

// Names of what the harness creates.
const (
	operatorNamespace = "minionvault-system"
	tokenSecret       = "vault-token"
	connectionName    = "scale-vault"
	templateName      = "scale"
	bindingNamespace  = "scale"
	floorNamespace    = "scale-floor"
	// policyPrefix starts every policy the operator writes for the
	// template; floorPolicyPrefix every policy the floor writes.
	policyPrefix      = "bench"
	floorPolicyPrefix = "floor"
	// floorMount is the floor's own AppRole mount, so that it never
	// touches the operator's roles.
	floorMount = "floor-minions"
	// sharedRoles: each binding has role r<i mod 10> and web.
	sharedRoles = 10
	// changedKey is the entity metadata key the template change adds.
	changedKey, changedValue = "scalechange", "v2"
	// changedPolicyPath is the rule the policy change adds to the
	// per-minion policy document: every per-minion policy's body changes,
	// the role policies' do not.
	changedPolicyPath = "salt/metadata/minions/{minion}"
)

// The operator runs with leader election, its Lease in operatorNamespace
// under a name of the harness's. The timing is the operator's default,
// which the harness does not pass (a previous release, run beside it, has
// no flags for it): these must follow the operator's flag defaults.
const (
	leaseName     = "scale-operator"
	leaseDuration = 15 * time.Second
	leaseRetry    = 400 * time.Millisecond
)

// benchInterval is the template's interval outside the failover phase:
// it sets none, and the operator's --default-interval is 1h.
const benchInterval = time.Hour

// failoverInterval is the template's interval during the failover phase:
// the new leader spreads its first drift checks over it, so the steady
// rate (N×3 reads per interval) is large enough for a minute's count to
// show a burst, and well under the default hour's.
const failoverInterval = 10 * time.Minute

// sharedPolicies is the number of role policies of either shape: r0..r9 and web.
const sharedPolicies = sharedRoles + 1

// expectedPolicies is the number of policies the template renders for n
// bindings of a shape.
func expectedPolicies(shape string, n int) int {
	if shape == shapePerMinion {
		return sharedPolicies + n
	}
	return sharedPolicies
}

// policyNames are the names of the policies the template renders for
// bindings 0..n-1 of a shape.
func policyNames(shape string, n int) []string {
	var names []string
	for r := range sharedRoles {
		names = append(names, fmt.Sprintf("%s_role_r%d", policyPrefix, r))
	}
	names = append(names, policyPrefix+"_role_web")
	if shape == shapePerMinion {
		for i := range n {
			names = append(names, policyPrefix+"_minion_"+minionID(i))
		}
	}
	return names
}

func minionID(i int) string { return fmt.Sprintf("m%05d", i) }

// rolesOf is binding i's pillar roles.
func rolesOf(i int) []string { return []string{fmt.Sprintf("r%d", i%sharedRoles), "web"} }

// metadataRoles is how the operator renders a roles list into entity
// metadata: the sorted, comma-joined list.
func metadataRoles(roles []string) string {
	s := slices.Clone(roles)
	slices.Sort(s)
	return strings.Join(s, ",")
}

func doc(v any) *v1alpha1.Document {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with maps of strings
	}
	d := v1alpha1.NewDocument(raw)
	return &d
}

// binding is minion i of the fleet in namespace ns.
func binding(ns string, i int) *v1alpha1.MinionBinding {
	return bindingWithRoles(ns, i, rolesOf(i))
}

func bindingWithRoles(ns string, i int, roles []string) *v1alpha1.MinionBinding {
	m := minionID(i)
	return &v1alpha1.MinionBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m},
		Spec: v1alpha1.MinionBindingSpec{
			MinionID:    m,
			TemplateRef: v1alpha1.MinionTemplateReference{Name: templateName},
			Grains:      doc(map[string]any{"id": m, "os": "Debian"}),
			Pillar:      doc(map[string]any{"roles": roles}),
		},
	}
}

// template is the fleet's MinionTemplate for a shape.
func template(shape string) *v1alpha1.MinionTemplate {
	docs := []v1alpha1.PolicyDocument{{
		Name: policyPrefix + "_role_{pillar[roles]}",
		Rules: []v1alpha1.PolicyRule{{
			Path: "salt/data/roles/{pillar[roles]}", Capabilities: []v1alpha1.PolicyCapability{"read"},
		}},
	}}
	if shape == shapePerMinion {
		docs = append(docs, v1alpha1.PolicyDocument{
			Name: policyPrefix + "_minion_{minion}",
			Rules: []v1alpha1.PolicyRule{{
				Path: "salt/data/minions/{minion}", Capabilities: []v1alpha1.PolicyCapability{"read"},
			}},
		})
	}
	return &v1alpha1.MinionTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName},
		Spec: v1alpha1.MinionTemplateSpec{
			ConnectionRef:   v1alpha1.VaultConnectionReference{Name: connectionName},
			Policies:        &v1alpha1.PoliciesSpec{Assign: []string{"saltstack/{minion}", policyPrefix + "_role_{pillar[roles]}"}},
			Metadata:        &v1alpha1.MetadataSpec{Entity: map[string]string{"roles": "{pillar[roles]}"}},
			PolicyDocuments: docs,
		},
	}
}

// changedPolicy is minion m's policy path the policy change adds.
func changedPolicy(m string) string { return strings.ReplaceAll(changedPolicyPath, "{minion}", m) }

// tokenConnection is a VaultConnection with token auth from the Secret
// tokenSecret in operatorNamespace.
func tokenConnection(addr string) *v1alpha1.VaultConnection {
	return &v1alpha1.VaultConnection{
		ObjectMeta: metav1.ObjectMeta{Name: connectionName},
		Spec: v1alpha1.VaultConnectionSpec{
			Address: addr,
			Auth: v1alpha1.VaultAuth{Token: &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{
				SecretReference: v1alpha1.SecretReference{Name: tokenSecret, Namespace: operatorNamespace}}}},
		},
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// entityName is the operator's default entity name of a minion
// (the template's entityName default, salt_minion_{minion}).
func entityName(minion string) string { return "salt_minion_" + minion }

// operatorMount is the AppRole mount the template's roles go to (its default).
const operatorMount = "salt-minions"
