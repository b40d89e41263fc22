package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/minionvault/minion-vault-operator/api/v1alpha1"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Connections turns VaultConnections into logged-in Vault clients, one per
// connection, cached and renewed by vault.Cache: reconciles never log in.
type Connections struct {
	Client   client.Client
	Cache    *vault.Cache
	Observer vault.Observer
	// ServiceAccount is the operator's own, for kubernetes auth.
	ServiceAccount types.NamespacedName
	// NewClient replaces the cache in unit tests.
	NewClient func(ctx context.Context, conn *v1alpha1.VaultConnection) (vault.Client, error)

	mu   sync.Mutex
	uids map[string]types.UID // connection name -> UID of its cached client
}

// Forget closes and drops the cached client of a deleted connection.
func (c *Connections) Forget(name string) {
	c.mu.Lock()
	uid, ok := c.uids[name]
	delete(c.uids, name)
	c.mu.Unlock()
	if ok && c.Cache != nil {
		c.Cache.Forget(string(uid))
	}
}

// track remembers which UID a name has, dropping the client of an earlier
// connection of the same name (deleted and created again).
func (c *Connections) track(conn *v1alpha1.VaultConnection) {
	c.mu.Lock()
	if c.uids == nil {
		c.uids = map[string]types.UID{}
	}
	old, ok := c.uids[conn.Name]
	c.uids[conn.Name] = conn.UID
	c.mu.Unlock()
	if ok && old != conn.UID && c.Cache != nil {
		c.Cache.Forget(string(old))
	}
}

// Get returns the client of the named VaultConnection.
func (c *Connections) Get(ctx context.Context, name string) (vault.Client, *v1alpha1.VaultConnection, error) {
	conn := &v1alpha1.VaultConnection{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, conn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, waiting(waitingForConnection, "VaultConnection %q does not exist", name)
		}
		return nil, nil, err
	}
	if c.NewClient != nil {
		vc, err := c.NewClient(ctx, conn)
		return vc, conn, err
	}
	cfg, key, err := c.config(ctx, conn)
	if err != nil {
		return nil, conn, err
	}
	c.track(conn)
	vc, err := c.Cache.Get(ctx, key, cfg, c.Observer)
	if err != nil {
		return nil, conn, fmt.Errorf("connecting to Vault at %s: %w", conn.Spec.Address, err)
	}
	return vc, conn, nil
}

// config reads the connection's Secrets. The cache key changes with the
// connection's generation and the Secrets' versions, so an edited Secret
// means a new login.
func (c *Connections) config(ctx context.Context, conn *v1alpha1.VaultConnection) (vault.Config, string, error) {
	spec := &conn.Spec
	cfg := vault.Config{Address: spec.Address, Namespace: spec.Namespace, Timeout: 30 * time.Second}
	if spec.Timeout != nil {
		cfg.Timeout = spec.Timeout.Duration
	}
	if rl := spec.RateLimit; rl != nil {
		cfg.QPS, cfg.Burst = float64(rl.QPS), int(rl.EffectiveBurst())
	}
	key := []string{string(conn.UID), fmt.Sprint(conn.Generation)}
	if t := spec.TLS; t != nil {
		cfg.ServerName, cfg.InsecureSkipVerify = t.ServerName, t.InsecureSkipVerify
		if t.CASecretRef != nil {
			ca, rv, err := c.secret(ctx, t.CASecretRef.Resolve())
			if err != nil {
				return cfg, "", err
			}
			cfg.CACert = ca
			key = append(key, rv)
		}
	}
	switch a := spec.Auth; {
	case a.Token != nil:
		tok, rv, err := c.secret(ctx, a.Token.SecretRef.Resolve())
		if err != nil {
			return cfg, "", err
		}
		cfg.Auth.Token = strings.TrimSpace(string(tok))
		key = append(key, rv)
	case a.AppRole != nil:
		sid, rv, err := c.secret(ctx, a.AppRole.SecretIDSecretRef.Resolve())
		if err != nil {
			return cfg, "", err
		}
		cfg.Auth.AppRole = &vault.AppRoleAuth{Mount: a.AppRole.EffectiveMount(), RoleID: a.AppRole.RoleID, SecretID: strings.TrimSpace(string(sid))}
		key = append(key, rv)
	case a.Kubernetes != nil:
		k := a.Kubernetes
		cfg.Auth.Kubernetes = &vault.KubernetesAuth{Mount: k.EffectiveMount(), Role: k.Role, JWT: c.serviceAccountToken(k.Audiences)}
	default:
		return cfg, "", waiting(waitingForCredential, "VaultConnection %q has no auth method", conn.Name)
	}
	return cfg, strings.Join(key, "/"), nil
}

func (c *Connections) secret(ctx context.Context, ref v1alpha1.SecretKeyReference) ([]byte, string, error) {
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", waiting(waitingForCredential, "Secret %s/%s does not exist", ref.Namespace, ref.Name)
		}
		return nil, "", err
	}
	v, ok := s.Data[ref.Key]
	if !ok || len(v) == 0 {
		return nil, "", waiting(waitingForCredential, "Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)
	}
	return v, s.ResourceVersion, nil
}

// serviceAccountToken asks the API server for a short-lived token of the
// operator's service account (TokenRequest), for kubernetes auth.
func (c *Connections) serviceAccountToken(audiences []string) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if c.ServiceAccount.Name == "" {
			return "", errors.New("kubernetes auth needs the operator's service account (--service-account)")
		}
		expiry := int64(600)
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &expiry}}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: c.ServiceAccount.Name, Namespace: c.ServiceAccount.Namespace}}
		if err := c.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			return "", fmt.Errorf("requesting a service account token: %w", err)
		}
		return tr.Status.Token, nil
	}
}
