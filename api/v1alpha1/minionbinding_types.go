package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MinionBindingSpec is one Salt minion and the data its template is rendered
// with.
type MinionBindingSpec struct {
	// minionID is the Salt minion ID. It names the minion's AppRole role
	// (auth/<mount>/role/<minionID>, stored lowercased by Vault) and is
	// {minion} in patterns. It cannot be changed: create a new binding
	// instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^/\s]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="minionID must not be . or .."
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="minionID is immutable"
	// +required
	MinionID string `json:"minionID"`

	// templateRef names the cluster-scoped MinionTemplate this minion is
	// rendered with.
	// +required
	TemplateRef MinionTemplateReference `json:"templateRef"`

	// grains are the minion's grains, as a mapping ({grains[...]} in
	// policies.assign, and grain lookups of the parameter stack). Everything
	// but "id" is reported by the minion itself; see the template's
	// trustMinionGrains.
	// +optional
	Grains *Document `json:"grains,omitempty"`

	// pillar is the minion's pillar, as a mapping ({pillar[...]} in patterns,
	// and pillar lookups of the parameter stack).
	// +optional
	Pillar *Document `json:"pillar,omitempty"`

	// config is the minion's configuration ("opts"), as a mapping: the
	// first place config.get looks in the parameter stack.
	// +optional
	Config *Document `json:"config,omitempty"`

	// suspend stops reconciling this binding: nothing is written to or
	// deleted from Vault while it is true. Deleting a suspended binding
	// still applies the template's deletionPolicy.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// MinionTemplateReference names a MinionTemplate.
type MinionTemplateReference struct {
	// name of the MinionTemplate.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`
}

// MinionBindingStatus is the observed state of a MinionBinding: what was
// last written to Vault for the minion.
type MinionBindingStatus struct {
	// observedGeneration is the metadata.generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when Vault holds the rendered state of the
	// current generation; Reconciling and Stalled follow kstatus.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// policies are the rendered policy names assigned to the minion's
	// AppRole role (token_policies), in order.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Policies []string `json:"policies,omitempty"`

	// pillarPaths are the rendered Vault pillar paths of the minion, in
	// order.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	PillarPaths []string `json:"pillarPaths,omitempty"`

	// entity is the minion's identity entity in Vault.
	// +optional
	Entity *EntityStatus `json:"entity,omitempty"`

	// appRole is the minion's AppRole role in Vault.
	// +optional
	AppRole *AppRoleStatus `json:"appRole,omitempty"`

	// policyDocuments are the names of the ACL policies rendered from the
	// template's policyDocuments for this minion, sorted.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	PolicyDocuments []string `json:"policyDocuments,omitempty"`

	// connection is the VaultConnection the Vault objects were written
	// through. Deletion uses it, so a binding can be cleaned up even after
	// its template is gone.
	// +optional
	Connection string `json:"connection,omitempty"`

	// lastSyncTime is when Vault was last made equal to the rendered state,
	// or found equal to it: a resync that finds Vault in sync moves it only
	// when it is a day old, so that a fleet in sync costs no status writes.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`

	// deletionPolicy is the template's deletionPolicy when Vault was last
	// brought to the rendered state. Deleting the binding follows the
	// template's current one, or this one when the template is gone.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// lastAppliedHash is a hash of the rendered state last written to Vault;
	// a change means the next reconcile writes again.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	LastAppliedHash string `json:"lastAppliedHash,omitempty"`

	// lastHandledReconcileAt is the last value of the
	// reconcile.minionvault.dev/requestedAt annotation that was handled.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`

	// driftCorrections counts the corrections of drift in a row, each
	// within a day of the one before: Vault rewritten by someone else
	// although nothing changed on the binding's side. Two or more make the
	// DriftRecurring condition: another writer keeps rewriting the
	// minion's objects (most likely a Salt master allowed to write roles
	// or entities). Cleared a day after the last correction.
	// +optional
	DriftCorrections *DriftCorrectionsStatus `json:"driftCorrections,omitempty"`
}

// DriftCorrectionsStatus is the current run of drift corrections.
type DriftCorrectionsStatus struct {
	// count of corrections in the run.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`

	// lastTime is when the last correction was written.
	LastTime metav1.Time `json:"lastTime"`

	// objects are the Vault objects the last correction rewrote.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Objects []string `json:"objects,omitempty"`
}

// EntityStatus is the minion's identity entity as written to Vault.
type EntityStatus struct {
	// name of the entity (the rendered entityName).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Name string `json:"name,omitempty"`

	// id is the entity ID Vault assigned.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ID string `json:"id,omitempty"`

	// metadata is the rendered entity metadata written to the entity.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// AppRoleStatus is the minion's AppRole role as written to Vault.
type AppRoleStatus struct {
	// mount is the AppRole auth mount the role is in.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Mount string `json:"mount,omitempty"`

	// name of the role (the minion ID, lowercased by Vault).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Name string `json:"name,omitempty"`

	// roleID is the role's role ID (also the name of the entity alias that
	// ties the role to the entity). Not a secret on its own.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	RoleID string `json:"roleID,omitempty"`

	// paramsDigest is a digest of the role's parameters, as the operator
	// last wrote or found them, with the Vault and mounts they are in:
	// until the binding's next drift check, a change of the binding that
	// leaves the role's parameters as they were writes the entity without
	// reading the role again, also after a restart or a new leader.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ParamsDigest string `json:"paramsDigest,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=mb,categories=minionvault
// +kubebuilder:printcolumn:name="Minion",type=string,JSONPath=`.spec.minionID`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.templateRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Policies",type=string,JSONPath=`.status.policies`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MinionBinding represents one Salt minion in Vault: the operator renders
// the referenced MinionTemplate with the minion's ID, grains and pillar, and
// writes the minion's AppRole role, identity entity and ACL policies.
type MinionBinding struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the minion and its data.
	// +required
	Spec MinionBindingSpec `json:"spec"`

	// status is what was last written to Vault for the minion. A new
	// object starts with observedGeneration -1, so that kstatus sees it in
	// progress.
	// +kubebuilder:default={observedGeneration:-1}
	// +optional
	Status MinionBindingStatus `json:"status,omitzero"`
}

// GetConditions returns the status conditions.
func (in *MinionBinding) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the status conditions.
func (in *MinionBinding) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// MinionBindingList is a list of MinionBindings.
type MinionBindingList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MinionBinding `json:"items"`
}
