package testkit

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
)

// The operator's namespace in these tests, and one it may not read.
const (
	OpNamespace    = "minion-vault-system"
	OtherNamespace = "tenant-a"
)

// NSSecret holds every key a connection reads (token, AppRole secret ID,
// CA), so one Secret serves any reference.
func NSSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"token": []byte("s.x"), "secret-id": []byte("sid"), "ca.crt": []byte("pem")}}
}

// NSConnection is a connection whose token (or AppRole secret ID) and
// optional CA Secrets are in the given namespaces ("" leaves the CA out).
func NSConnection(authNS, caNS string, appRole bool) *v1alpha1.VaultConnection {
	conn := &v1alpha1.VaultConnection{ObjectMeta: metav1.ObjectMeta{Name: "vault", UID: "uid-vault", Generation: 1},
		Spec: v1alpha1.VaultConnectionSpec{Address: "http://vault"}}
	ref := v1alpha1.SecretReference{Namespace: authNS, Name: "vault-token"}
	if appRole {
		conn.Spec.Auth.AppRole = &v1alpha1.AppRoleAuth{RoleID: "r", SecretIDSecretRef: v1alpha1.SecretIDSecretReference{SecretReference: ref}}
	} else {
		conn.Spec.Auth.Token = &v1alpha1.TokenAuth{SecretRef: v1alpha1.TokenSecretReference{SecretReference: ref}}
	}
	if caNS != "" {
		conn.Spec.TLS = &v1alpha1.VaultTLS{CASecretRef: &v1alpha1.CASecretReference{SecretReference: v1alpha1.SecretReference{Namespace: caNS, Name: "vault-ca"}}}
	}
	return conn
}
