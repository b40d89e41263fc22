// Regenerate deepcopy and CRDs (from the module root):
//   bin/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/... && bin/controller-gen crd:allowDangerousTypes=false paths=./api/... output:crd:artifacts:config=config/crd/bases

// Package v1alpha1 contains the API types of the minionvault.dev group:
// VaultConnection (how to reach and log in to a Vault server), MinionTemplate
// (how a Salt minion is represented in Vault: AppRole role, identity entity,
// ACL policies, pillar paths) and MinionBinding (one minion rendered through a
// template).
//
// The package imports only k8s.io/apimachinery. Rendering lives elsewhere;
// the helpers here only resolve defaults.
//
// +kubebuilder:object:generate=true
// +groupName=minionvault.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of all kinds in this package.
const GroupName = "minionvault.dev"

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeGroupVersion is an alias of GroupVersion for generated clients.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names.
const (
	VaultConnectionKind = "VaultConnection"
	MinionTemplateKind  = "MinionTemplate"
	MinionBindingKind   = "MinionBinding"
)

// Resource returns a GroupResource of this group for the given resource name.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&VaultConnection{}, &VaultConnectionList{},
		&MinionTemplate{}, &MinionTemplateList{},
		&MinionBinding{}, &MinionBindingList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
