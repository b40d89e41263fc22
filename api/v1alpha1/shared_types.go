package v1alpha1

import (
	"bytes"
	"errors"
)

// Condition types. The operator follows kstatus: Ready is always present;
// Reconciling and Stalled are present only while they are true.
const (
	// ReadyCondition is True when the object's desired state is in Vault.
	ReadyCondition = "Ready"

	// ReconcilingCondition is True while the operator is working towards the
	// desired state (first reconcile, new generation, retrying).
	ReconcilingCondition = "Reconciling"

	// StalledCondition is True when the operator cannot make progress without
	// a change to the object or to something it refers to (invalid
	// configuration, policy refused by a guard rail, ...). Stalled objects are
	// not retried until they change.
	StalledCondition = "Stalled"

	// DriftRecurringCondition is True on a MinionBinding while Vault keeps
	// being rewritten after the operator corrected it: another writer with
	// rights to the minion's role or entity (most likely a Salt master with
	// saltext-vault's stock policy, or AppRole parameters unlike the
	// template's). Present only while true; it does not change Ready.
	DriftRecurringCondition = "DriftRecurring"

	// UntestedVersionCondition is True on a VaultConnection whose Vault
	// reports a version the project does not test (pkg/vault's
	// tested-versions.txt, docs/compatibility.md): another release of a
	// tested line (UntestedReleaseReason) or a line the project does not
	// build (UntestedLineReason). Present only while true; work goes on and
	// Ready is unchanged.
	UntestedVersionCondition = "UntestedVersion"
)

// Condition reasons, in CamelCase as metav1.Condition requires.
const (
	// UntestedReleaseReason: the Vault's line is tested, at another
	// release (UntestedVersion=True).
	UntestedReleaseReason = "UntestedRelease"

	// UntestedLineReason: no release of the Vault's line is tested
	// (UntestedVersion=True).
	UntestedLineReason = "UntestedLine"

	// SucceededReason: the desired state was applied (Ready=True).
	SucceededReason = "Succeeded"

	// OtherWriterReason: the minion's objects in Vault were rewritten again
	// after the operator corrected them (DriftRecurring=True).
	OtherWriterReason = "OtherWriter"

	// ProgressingReason: reconciliation is under way (Reconciling=True).
	ProgressingReason = "Progressing"

	// RenderFailedReason: a template pattern could not be rendered for the
	// minion's data (malformed pattern, conversion on a list, ...).
	RenderFailedReason = "RenderFailed"

	// ValidationFailedReason: the spec, or what it renders to, is refused
	// before anything is written to Vault (for example metadata over Vault's
	// limits, a policy name with spaces, a parameter file that is not valid).
	ValidationFailedReason = "ValidationFailed"

	// NamespaceNotAllowedReason: the binding's namespace does not match the
	// template's namespaceSelector.
	NamespaceNotAllowedReason = "NamespaceNotAllowed"

	// PolicyNotAllowedReason: a rendered policy name matches none of the
	// template's allowedPolicies globs.
	PolicyNotAllowedReason = "PolicyNotAllowed"

	// DuplicateMinionIDReason: another MinionBinding, in any namespace and
	// for any template, already claims the same minion ID (compared as
	// Vault does, case-insensitively); the oldest claim keeps it.
	DuplicateMinionIDReason = "DuplicateMinionID"

	// MinionIDReleasingReason: the MinionBinding that held the minion ID is
	// being deleted; this one waits until its Vault objects are gone, then
	// takes the ID over (a handover never interleaves two bindings' writes).
	MinionIDReleasingReason = "MinionIDReleasing"

	// MinionIDConflictReason: the minion's objects in Vault carry the owner
	// marker of another MinionBinding (another shard of this cluster, or
	// another cluster on the same Vault). Nothing is written; the operator
	// checks again periodically, and takes the minion over when the holder
	// in this cluster is gone.
	MinionIDConflictReason = "MinionIDConflict"

	// MinionIDRetainedReason: the minion's objects in Vault were retained
	// (deletionPolicy Retain) for a MinionBinding that was deleted: they
	// are kept for that binding, created again under its namespace and
	// name (a restore), and handed to no other, until a cluster
	// administrator releases them (the VaultConnection annotation
	// minionvault.dev/collect).
	MinionIDRetainedReason = "MinionIDRetained"

	// MinionIDLostReason: the minion's objects in Vault belong to a
	// MinionBinding that is gone without its deletion having run (its
	// finalizer stripped, its namespace lost, etcd restored). They are kept
	// for that binding, created again under its namespace and name, until
	// the operator's restore window ends; then the operator deletes them,
	// and this binding creates the minion afresh. Nothing is written
	// meanwhile.
	MinionIDLostReason = "MinionIDLost"

	// NotOwnedReason: the minion's entity or AppRole role exists in Vault
	// without the operator's owner marker (made by a Salt master, by hand,
	// or by a login), and the template does not set adoptMinions. Nothing
	// is written; the operator checks again periodically.
	NotOwnedReason = "NotOwned"

	// VaultConflictReason: Vault refused a write because of its current
	// state (for example an alias left by a role deleted by hand, or a
	// mount re-created meanwhile). The operator repairs what it can and
	// retries with backoff; it is never Stalled for it.
	VaultConflictReason = "VaultConflict"

	// TemplateNotFoundReason: the referenced MinionTemplate does not exist.
	TemplateNotFoundReason = "TemplateNotFound"

	// ConnectionNotReadyReason: the referenced VaultConnection does not
	// exist, or a Secret it names (or a key in it) is missing, or it is
	// not allowed to name it (SecretNamespaceNotAllowedReason).
	ConnectionNotReadyReason = "ConnectionNotReady"

	// SecretNamespaceNotAllowedReason: the VaultConnection names a Secret
	// outside the namespace the operator reads Secrets in (its own, or its
	// --secret-namespace). The operator may read Secrets only there, so it
	// does not try: the connection is Stalled until the reference moves
	// there (docs/operations.md, Upgrades), and its bindings and templates
	// wait with ConnectionNotReady.
	SecretNamespaceNotAllowedReason = "SecretNamespaceNotAllowed"

	// VaultUnavailableReason: Vault could not be reached, or answered with a
	// transient error; the operator retries with backoff.
	VaultUnavailableReason = "VaultUnavailable"

	// AccessDeniedReason: Vault refused the operator's credentials or its
	// policy does not allow a call (HTTP 401 or 403, or 400 to a login,
	// such as a wrong AppRole secret ID). Fixed outside the
	// binding (a rotated Secret, the operator policy), so the operator
	// retries with backoff and on a change of the connection's Secrets.
	AccessDeniedReason = "AccessDenied"

	// PolicyNotOwnedReason: an ACL policy to be written from policyDocuments
	// already exists in Vault and was not written by the operator, and the
	// template does not set adoptPolicies.
	PolicyNotOwnedReason = "PolicyNotOwned"

	// SuspendedReason: the binding is suspended (spec.suspend is true).
	SuspendedReason = "Suspended"

	// DeletionBlockedReason: the object is being deleted but its Vault
	// objects cannot be removed yet (for example the connection is gone).
	DeletionBlockedReason = "DeletionBlocked"
)

const (
	// Finalizer is set by the operator on objects whose Vault state it
	// manages, so that the Vault state can be removed or retained (see
	// MinionTemplateSpec.DeletionPolicy) before the object disappears.
	Finalizer = "minionvault.dev/finalizer"

	// VaultObjectsAnnotation on a MinionBinding records, before the
	// operator writes to Vault, where it writes: a JSON list of {"vault",
	// "connection", "mount", "entity", "deletionPolicy"} (the AppRole role
	// is always named by the minion ID; vault is the Vault's cluster ID and
	// namespace). A crash or a failed write never loses track of an object,
	// and a switch of template, mount or entity name removes the objects of
	// the old place. It only says where to look: the operator deletes or
	// takes over nothing unless Vault proves it the binding's (the owner
	// marker on the entity, see pkg/ownership), so an edited record gains
	// nothing.
	VaultObjectsAnnotation = "minionvault.dev/vault-objects"

	// ReconcileRequestAnnotation, when set or changed to any value (a
	// timestamp by convention), asks the operator to reconcile the object
	// now. The handled value is echoed in status.lastHandledReconcileAt.
	ReconcileRequestAnnotation = "reconcile.minionvault.dev/requestedAt"

	// CollectAnnotation on a VaultConnection (cluster-scoped: a cluster
	// administrator's, never a tenant's) asks the operator to collect now
	// the lost or retained minions of the MinionBindings it names by UID
	// (comma-separated), in the Vault the connection reaches: their
	// AppRole role, then their entity, are deleted as a deletion would,
	// without waiting for the restore window (lost) or for the binding
	// coming back (retained). A UID whose binding exists collects nothing.
	// The UID is in the waiting claimant's condition and in the
	// MinionLost and Retained events.
	CollectAnnotation = "minionvault.dev/collect"
)

// Document is an arbitrary JSON object kept as its raw JSON text, the way
// apiextensions/v1.JSON keeps schemaless values: decoding and encoding copy
// the bytes, so key order and number formatting survive a JSON round trip
// in Go.
//
// The Kubernetes API server does not keep key order (it re-encodes objects),
// so code that needs the document order of a manifest (the CLI) must read
// the manifest text itself; the operator sees keys as the API server returns
// them.
//
// +kubebuilder:validation:Type=object
// +kubebuilder:pruning:PreserveUnknownFields
type Document struct {
	// Raw is the JSON text of the document.
	Raw []byte `json:"-"`
}

var nullLiteral = []byte("null")

// NewDocument returns a Document holding a copy of raw JSON text.
func NewDocument(raw []byte) Document {
	return Document{Raw: bytes.Clone(raw)}
}

// IsZero reports whether the document holds no value (absent or null).
func (d Document) IsZero() bool {
	return len(d.Raw) == 0 || bytes.Equal(d.Raw, nullLiteral)
}

// MarshalJSON returns the raw JSON text, or null for an empty document.
func (d Document) MarshalJSON() ([]byte, error) {
	if len(d.Raw) == 0 {
		return nullLiteral, nil
	}
	return d.Raw, nil
}

// UnmarshalJSON stores a copy of the JSON text; null leaves the document
// empty.
func (d *Document) UnmarshalJSON(data []byte) error {
	if d == nil {
		return errors.New("v1alpha1.Document: UnmarshalJSON on nil pointer")
	}
	if len(data) == 0 || bytes.Equal(data, nullLiteral) {
		d.Raw = nil
		return nil
	}
	d.Raw = append(d.Raw[:0], data...)
	return nil
}

// SecretReference names a Secret in a named namespace. VaultConnection is
// cluster-scoped, so the namespace is always explicit. The operator reads
// Secrets only in its own namespace (--secret-namespace): the schema cannot
// say so, since that namespace is chosen at install time, so a reference
// elsewhere is refused by the operator (SecretNamespaceNotAllowedReason).
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
}

// SecretKeyReference is a fully resolved reference to one key of a Secret.
// It is not part of the API schema: the *SecretReference types of the API
// convert to it with their Resolve method, which applies their default key.
//
// +kubebuilder:object:generate=false
type SecretKeyReference struct {
	Name      string
	Namespace string
	Key       string
}

func keyOr(key, def string) string {
	if key == "" {
		return def
	}
	return key
}

// ConfigMapReference names a ConfigMap in a named namespace.
type ConfigMapReference struct {
	// name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// namespace of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`
}

// ParameterFile is one parameter file of a template: its YAML document
// written as an object, or a string holding the file's YAML text (for
// content pasted as is, with `|`).
//
// +kubebuilder:validation:Schemaless
// +kubebuilder:pruning:PreserveUnknownFields
type ParameterFile struct {
	// Raw is the JSON text of the file: an object or a string.
	Raw []byte `json:"-"`
}

// MarshalJSON returns the raw JSON text, or null when empty.
func (f ParameterFile) MarshalJSON() ([]byte, error) { return Document(f).MarshalJSON() }

// UnmarshalJSON stores a copy of the JSON text.
func (f *ParameterFile) UnmarshalJSON(data []byte) error {
	if f == nil {
		return errors.New("v1alpha1.ParameterFile: UnmarshalJSON on nil pointer")
	}
	return (*Document)(f).UnmarshalJSON(data)
}
