package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults applied to VaultConnection by the API server (and by the
// Effective* helpers for objects that were never defaulted, such as
// manifests read from disk).
const (
	DefaultKubernetesAuthMount = "kubernetes"
	DefaultAppRoleAuthMount    = "approle"
	DefaultCASecretKey         = "ca.crt"
	DefaultSecretIDSecretKey   = "secret-id"
	DefaultTokenSecretKey      = "token"
	DefaultConnectionTimeout   = 30 * time.Second
	DefaultCheckInterval       = 30 * time.Second
)

// VaultConnectionSpec describes how the operator reaches and logs in to one
// Vault server.
type VaultConnectionSpec struct {
	// address is the URL of the Vault server, with scheme http or https, for
	// example https://vault.example.com:8200.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="address must be an absolute http or https URL"
	// +required
	Address string `json:"address"`

	// tls configures how the Vault server's certificate is verified. When
	// omitted, the system trust store is used and the host name of address is
	// verified.
	// +optional
	TLS *VaultTLS `json:"tls,omitempty"`

	// namespace is the Vault Enterprise namespace every request is made in
	// (sent as the X-Vault-Namespace header), for example "admin/salt".
	// Leave empty for Vault Community Edition or the root namespace.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// auth is how the operator logs in to Vault. Exactly one method must be
	// set. The token obtained is never written to status, events or logs.
	// +required
	Auth VaultAuth `json:"auth"`

	// rateLimit bounds the rate of requests the operator sends to this Vault
	// server. When omitted, the operator does not rate-limit requests to this
	// server beyond its own reconcile concurrency.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// timeout is the timeout of one request to Vault, a Go duration such as
	// "30s" or "1m".
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// checkInterval is how often the operator checks the connection: that
	// its login still works, and that Vault is still the same Vault (its
	// cluster ID and the accessors of its AppRole auth mounts, see
	// status.identity). When Vault was re-initialised or restored, or an
	// AppRole mount re-created, every binding and template of the
	// connection is reconciled at once instead of at its next interval. A
	// Go duration of at least 5s; each check costs three requests.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s')",message="checkInterval must be at least 5s"
	// +optional
	CheckInterval *metav1.Duration `json:"checkInterval,omitempty"`
}

// VaultTLS configures TLS verification of the Vault server.
// +kubebuilder:validation:XValidation:rule="!has(self.caSecretRef) || size(self.caSecretRef.name) > 0",message="tls.caSecretRef needs a name"
type VaultTLS struct {
	// caSecretRef selects a Secret key holding the PEM-encoded CA
	// certificate(s) that sign the Vault server's certificate. The key
	// defaults to "ca.crt". When omitted, the system trust store is used.
	// +optional
	CASecretRef *CASecretReference `json:"caSecretRef,omitempty"`

	// serverName is the host name expected in the Vault server's certificate
	// (also sent as TLS SNI). Defaults to the host name of address.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServerName string `json:"serverName,omitempty"`

	// insecureSkipVerify disables verification of the Vault server's
	// certificate. Only for tests: anyone on the network path can then read
	// the operator's Vault token.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// CASecretReference selects the Secret key holding a CA bundle.
type CASecretReference struct {
	SecretReference `json:",inline"`

	// key of the Secret's data holding the PEM-encoded CA bundle.
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// Resolve returns the reference with its key defaulted.
func (r CASecretReference) Resolve() SecretKeyReference {
	return SecretKeyReference{Name: r.Name, Namespace: r.Namespace, Key: keyOr(r.Key, DefaultCASecretKey)}
}

// VaultAuth selects how the operator logs in to Vault: exactly one of
// kubernetes, appRole or token.
// +kubebuilder:validation:XValidation:rule="(has(self.kubernetes) ? 1 : 0) + (has(self.appRole) ? 1 : 0) + (has(self.token) ? 1 : 0) == 1",message="exactly one of auth.kubernetes, auth.appRole or auth.token must be set"
type VaultAuth struct {
	// kubernetes logs in with a token of the operator's own service account
	// through Vault's Kubernetes auth method.
	// +optional
	Kubernetes *KubernetesAuth `json:"kubernetes,omitempty"`

	// appRole logs in with a role ID and a secret ID through Vault's AppRole
	// auth method.
	// +optional
	AppRole *AppRoleAuth `json:"appRole,omitempty"`

	// token uses a Vault token read from a Secret as is. The token should be
	// renewable or long-lived; the operator renews it when it can.
	// +optional
	Token *TokenAuth `json:"token,omitempty"`
}

// KubernetesAuth configures login through Vault's Kubernetes auth method.
type KubernetesAuth struct {
	// mount is the path the Kubernetes auth method is mounted at, without
	// the "auth/" prefix.
	// +kubebuilder:default="kubernetes"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$')",message="mount must be a Vault mount path such as kubernetes or k8s/prod: letters, digits, '_', '.', '-', segments separated by single '/', no leading or trailing '/'"
	// +optional
	Mount string `json:"mount,omitempty"`

	// role is the Vault role of the Kubernetes auth method to log in as.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +required
	Role string `json:"role"`

	// audiences are requested for the service account token presented to
	// Vault; they must match the role's audience setting. When empty, the
	// token carries the cluster's default audience.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	Audiences []string `json:"audiences,omitempty"`
}

// EffectiveMount returns mount, or its default.
func (a *KubernetesAuth) EffectiveMount() string {
	return keyOr(a.Mount, DefaultKubernetesAuthMount)
}

// AppRoleAuth configures login through Vault's AppRole auth method.
type AppRoleAuth struct {
	// mount is the path the AppRole auth method is mounted at, without the
	// "auth/" prefix.
	// +kubebuilder:default="approle"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*$')",message="mount must be a Vault mount path such as approle or salt/approle: letters, digits, '_', '.', '-', segments separated by single '/', no leading or trailing '/'"
	// +optional
	Mount string `json:"mount,omitempty"`

	// roleID is the role ID of the AppRole to log in as (not a secret on its
	// own).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	RoleID string `json:"roleID"`

	// secretIDSecretRef selects the Secret key holding the AppRole secret
	// ID. The key defaults to "secret-id".
	// +required
	SecretIDSecretRef SecretIDSecretReference `json:"secretIDSecretRef"`
}

// EffectiveMount returns mount, or its default.
func (a *AppRoleAuth) EffectiveMount() string {
	return keyOr(a.Mount, DefaultAppRoleAuthMount)
}

// SecretIDSecretReference selects the Secret key holding an AppRole secret ID.
type SecretIDSecretReference struct {
	SecretReference `json:",inline"`

	// key of the Secret's data holding the secret ID.
	// +kubebuilder:default="secret-id"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// Resolve returns the reference with its key defaulted.
func (r SecretIDSecretReference) Resolve() SecretKeyReference {
	return SecretKeyReference{Name: r.Name, Namespace: r.Namespace, Key: keyOr(r.Key, DefaultSecretIDSecretKey)}
}

// TokenAuth configures login with a static Vault token.
type TokenAuth struct {
	// secretRef selects the Secret key holding the Vault token. The key
	// defaults to "token".
	// +required
	SecretRef TokenSecretReference `json:"secretRef"`
}

// TokenSecretReference selects the Secret key holding a Vault token.
type TokenSecretReference struct {
	SecretReference `json:",inline"`

	// key of the Secret's data holding the token.
	// +kubebuilder:default="token"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// Resolve returns the reference with its key defaulted.
func (r TokenSecretReference) Resolve() SecretKeyReference {
	return SecretKeyReference{Name: r.Name, Namespace: r.Namespace, Key: keyOr(r.Key, DefaultTokenSecretKey)}
}

// RateLimit is a token bucket for requests to Vault.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || self.burst >= self.qps",message="rateLimit.burst must not be lower than rateLimit.qps"
type RateLimit struct {
	// qps is the sustained number of requests per second.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +required
	QPS int32 `json:"qps"`

	// burst is the number of requests that may be sent at once above qps.
	// Defaults to qps.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	Burst int32 `json:"burst,omitempty"`
}

// EffectiveBurst returns burst, or qps when burst is unset.
func (r *RateLimit) EffectiveBurst() int32 {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.QPS
}

// VaultConnectionStatus is the observed state of a VaultConnection.
type VaultConnectionStatus struct {
	// observedGeneration is the metadata.generation last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True once the operator has logged in to Vault
	// with the current spec; Reconciling and Stalled follow kstatus.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// vaultVersion is the version the Vault server reports, for example
	// "1.21.0".
	// +kubebuilder:validation:MaxLength=64
	// +optional
	VaultVersion string `json:"vaultVersion,omitempty"`

	// lastError is the last error met talking to Vault, empty after a
	// success. It never contains a token or secret ID.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastError string `json:"lastError,omitempty"`

	// lastLoginTime is when the operator last logged in to Vault (or, for
	// token auth, last looked up or renewed its token) successfully.
	// +optional
	LastLoginTime *metav1.Time `json:"lastLoginTime,omitempty"`

	// clusterID is the cluster ID Vault reports (sys/seal-status). It
	// changes when Vault is initialised anew, also while the check fails
	// (the token died with the Vault that was); a check that gets no answer,
	// or no cluster ID (sealed), keeps the last one.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// identity is a fingerprint of the Vault the operator talks to: its
	// cluster ID and the accessors of its AppRole auth mounts. A change
	// means that Vault lost or replaced the objects the operator wrote
	// (re-initialised, restored, a mount re-created): every binding and
	// template of the connection is then reconciled at once.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Identity string `json:"identity,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=vc,categories=minionvault
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.vaultVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// VaultConnection is a Vault server and the credentials the operator uses to
// manage minions in it. MinionTemplates refer to it by name.
type VaultConnection struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired connection.
	// +required
	Spec VaultConnectionSpec `json:"spec"`

	// status is the observed state of the connection. A new object starts
	// with observedGeneration -1, so that kstatus sees it in progress.
	// +kubebuilder:default={observedGeneration:-1}
	// +optional
	Status VaultConnectionStatus `json:"status,omitzero"`
}

// GetConditions returns the status conditions.
func (in *VaultConnection) GetConditions() []metav1.Condition {
	return in.Status.Conditions
}

// SetConditions replaces the status conditions.
func (in *VaultConnection) SetConditions(conditions []metav1.Condition) {
	in.Status.Conditions = conditions
}

// EffectiveCheckInterval returns spec.checkInterval, or its default.
func (in *VaultConnection) EffectiveCheckInterval() time.Duration {
	if in.Spec.CheckInterval != nil && in.Spec.CheckInterval.Duration > 0 {
		return in.Spec.CheckInterval.Duration
	}
	return DefaultCheckInterval
}

// EffectiveTimeout returns spec.timeout, or its default.
func (in *VaultConnection) EffectiveTimeout() time.Duration {
	if in.Spec.Timeout != nil && in.Spec.Timeout.Duration > 0 {
		return in.Spec.Timeout.Duration
	}
	return DefaultConnectionTimeout
}

// +kubebuilder:object:root=true

// VaultConnectionList is a list of VaultConnections.
type VaultConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VaultConnection `json:"items"`
}
