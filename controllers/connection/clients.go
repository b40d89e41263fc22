package connection

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
	"github.com/minionvault/minion-vault-operator/controllers/internal/outcome"
	"github.com/minionvault/minion-vault-operator/controllers/internal/watch"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// Secrets: no marker here, so the generated ClusterRole grants none. The
// operator reads Secrets only in its own namespace (--secret-namespace),
// through the namespaced Role config/rbac/secret_reader_role.yaml: list and
// watch for the metadata watches (RBAC cannot tell a metadata-only request
// from a full one), get for the data of the Secrets a VaultConnection
// names. See docs/security.md.

// Connections turns VaultConnections into logged-in Vault clients, one per
// connection, cached and renewed by vault.Cache: reconciles never log in.
type Connections struct {
	// Client reads VaultConnections (cached) and requests service account
	// tokens.
	Client client.Client
	// APIReader reads Secret data from the API server, by name: the
	// operator caches no Secret data (nil: Client).
	APIReader client.Reader
	// Metadata reads Secrets' metadata from the cache the Secret watches
	// fill, so that a reconcile learns the Secrets' resourceVersions, and
	// that its client is current, without a request (nil: every Get reads
	// the Secrets through APIReader).
	Metadata client.Reader
	Cache    *vault.Cache
	Observer vault.Observer
	// ServiceAccount is the operator's own, for kubernetes auth.
	ServiceAccount types.NamespacedName
	// SecretNamespace is the only namespace whose Secrets a connection may
	// name (the operator's RBAC allows no other); "" allows any.
	SecretNamespace string
	// NewClient replaces the cache in unit tests.
	NewClient func(ctx context.Context, conn *v1alpha1.VaultConnection) (vault.Client, error)

	mu   sync.Mutex
	uids map[string]types.UID // connection name -> UID of its cached client
	// waits: connection name -> what config waits for at the versions
	// of the key, so that a missing Secret key is not a read per reconcile.
	waits map[string]keyedError
	// gates: connection name -> its last check; probing: the checks
	// Verify has under way (gate.go).
	gates   map[string]connGate
	probing map[string]probe
	wake    func(name string)
	opened  []func(name string)
}

type keyedError struct {
	key string
	err error
}

// Forget closes and drops the cached client of a deleted connection.
func (c *Connections) Forget(name string) {
	c.mu.Lock()
	uid, ok := c.uids[name]
	delete(c.uids, name)
	delete(c.waits, name)
	delete(c.gates, name)
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

// Get returns the client of the named VaultConnection, or the wait of a
// connection whose check fails (gate.go): then without a Vault
// request, a login included.
func (c *Connections) Get(ctx context.Context, name string) (vault.Client, *v1alpha1.VaultConnection, error) {
	vc, conn, _, err := c.client(ctx, name, true)
	return vc, conn, err
}

// ServerInfo is what the connection's Vault says of itself (its version
// and cluster ID), read without logging in: a connection whose login
// fails (its token died with a Vault initialised anew) still tells which
// Vault it points at.
func (c *Connections) ServerInfo(ctx context.Context, conn *v1alpha1.VaultConnection) (vault.ServerInfo, error) {
	if c.NewClient != nil {
		vc, err := c.NewClient(ctx, conn)
		if err != nil {
			return vault.ServerInfo{}, err
		}
		return vc.ServerInfo(ctx)
	}
	cfg, _, err := c.config(ctx, conn)
	if err != nil {
		return vault.ServerInfo{}, err
	}
	return vault.ReadServerInfo(ctx, cfg, c.Observer)
}

// client is Get, past the gate unless gated, with the client's cache key.
func (c *Connections) client(ctx context.Context, name string, gated bool) (vault.Client, *v1alpha1.VaultConnection, string, error) {
	conn := &v1alpha1.VaultConnection{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: name}, conn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, "", outcome.Waiting(outcome.WaitingForConnection, "VaultConnection %q does not exist", name)
		}
		return nil, nil, "", err
	}
	gate := func(key string) error {
		if !gated {
			return nil
		}
		return c.gated(name, key)
	}
	if c.NewClient != nil {
		if err := gate(""); err != nil {
			return nil, conn, "", err
		}
		vc, err := c.NewClient(ctx, conn)
		return vc, conn, "", err
	}
	c.track(conn)
	seen, vc, err := c.current(ctx, conn)
	if err == nil && vc != nil {
		if err = gate(seen); err != nil {
			vc = nil
		}
	}
	if vc != nil || err != nil {
		return vc, conn, seen, err
	}
	cfg, key, err := c.config(ctx, conn)
	c.noteWait(conn.Name, seen, err)
	if err == nil {
		err = gate(key) // before a login
	}
	if err != nil {
		return nil, conn, key, err
	}
	vc, err = c.Cache.Get(ctx, key, cfg, c.Observer)
	if err != nil {
		return nil, conn, key, fmt.Errorf("connecting to Vault at %s: %w", conn.Spec.Address, err)
	}
	return vc, conn, key, nil
}

// current is the cached client when the connection's generation and its
// Secrets' resourceVersions, as the metadata cache has them, are those it
// logged in with, or what it waits for at those versions: then no Secret is
// read. Otherwise (nil, nil) and config decides; seen is the key of the
// versions seen ("" without a metadata cache).
func (c *Connections) current(ctx context.Context, conn *v1alpha1.VaultConnection) (seen string, _ vault.Client, _ error) {
	if err := c.secretNamespace(conn); err != nil {
		return "", nil, err
	}
	if c.Metadata == nil || c.Cache == nil {
		return "", nil, nil
	}
	versions := []string{fmt.Sprint(conn.Generation)}
	for _, ref := range watch.SecretRefs(conn) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := c.Metadata.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, m); err != nil {
			if apierrors.IsNotFound(err) {
				// The watch that fills this cache wakes the connection's
				// bindings when the Secret appears.
				return "", nil, outcome.Waiting(outcome.WaitingForCredential, "Secret %s/%s does not exist", ref.Namespace, ref.Name)
			}
			return "", nil, nil
		}
		versions = append(versions, m.ResourceVersion)
	}
	seen = vault.CacheKey(string(conn.UID), versions...)
	c.mu.Lock()
	w, ok := c.waits[conn.Name]
	c.mu.Unlock()
	if ok && w.key == seen {
		return seen, nil, w.err
	}
	if vc, ok := c.Cache.Lookup(seen); ok {
		return seen, vc, nil
	}
	return seen, nil, nil
}

// noteWait remembers that config waits (for a Secret key, an auth method)
// at the versions seen, and forgets it once config works.
func (c *Connections) noteWait(name, seen string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seen == "" || !outcome.IsWaiting(err) {
		delete(c.waits, name)
		return
	}
	if c.waits == nil {
		c.waits = map[string]keyedError{}
	}
	c.waits[name] = keyedError{key: seen, err: err}
}

// secretNamespace refuses, before anything is read, a connection that
// names a Secret outside SecretNamespace: the operator may not read it (a
// Get would be forbidden, and retried with backoff for ever), and it should
// not try. Only an edit of the connection helps, so the connection stalls;
// its bindings wait on it as on a missing Secret.
func (c *Connections) secretNamespace(conn *v1alpha1.VaultConnection) error {
	if c.SecretNamespace == "" {
		return nil
	}
	for _, f := range secretRefFields(conn) {
		if f.ref.Namespace == c.SecretNamespace {
			continue
		}
		return outcome.ErrWaiting{What: outcome.WaitingForCredential, Stall: v1alpha1.SecretNamespaceNotAllowedReason, Msg: fmt.Sprintf(
			"VaultConnection %q: %s names Secret %s/%s, but the operator reads Secrets only in namespace %q: "+
				"move the Secret into %q and set the reference's namespace to it (docs/operations.md#connection-secrets-in-the-operators-namespace)",
			conn.Name, f.field, f.ref.Namespace, f.ref.Name, c.SecretNamespace, c.SecretNamespace)}
	}
	return nil
}

// secretRefField is a Secret reference of a connection, with the field
// that holds it (for messages).
type secretRefField struct {
	field string
	ref   v1alpha1.SecretReference
}

// secretRefFields lists the Secret references of a connection's spec.
func secretRefFields(conn *v1alpha1.VaultConnection) []secretRefField {
	var out []secretRefField
	if t := conn.Spec.TLS; t != nil && t.CASecretRef != nil {
		out = append(out, secretRefField{"spec.tls.caSecretRef", t.CASecretRef.SecretReference})
	}
	if a := conn.Spec.Auth; a.Token != nil {
		out = append(out, secretRefField{"spec.auth.token.secretRef", a.Token.SecretRef.SecretReference})
	}
	if a := conn.Spec.Auth; a.AppRole != nil {
		out = append(out, secretRefField{"spec.auth.appRole.secretIDSecretRef", a.AppRole.SecretIDSecretRef.SecretReference})
	}
	return out
}

// config reads the connection's Secrets. The cache key changes with the
// connection's generation and the Secrets' versions, so an edited Secret
// means a new login.
func (c *Connections) config(ctx context.Context, conn *v1alpha1.VaultConnection) (vault.Config, string, error) {
	spec := &conn.Spec
	if err := c.secretNamespace(conn); err != nil {
		return vault.Config{}, "", err
	}
	cfg := vault.Config{Address: spec.Address, Namespace: spec.Namespace, Timeout: 30 * time.Second}
	if spec.Timeout != nil {
		cfg.Timeout = spec.Timeout.Duration
	}
	if rl := spec.RateLimit; rl != nil {
		cfg.QPS, cfg.Burst = float64(rl.QPS), int(rl.EffectiveBurst())
	}
	// The same versions, in the same order, as current's key.
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
		return cfg, "", outcome.Waiting(outcome.WaitingForCredential, "VaultConnection %q has no auth method", conn.Name)
	}
	return cfg, vault.CacheKey(key[0], key[1:]...), nil
}

// secret reads one key of a Secret from the API server: only on a login
// (a new connection, generation or Secret version), never from a cache.
func (c *Connections) secret(ctx context.Context, ref v1alpha1.SecretKeyReference) ([]byte, string, error) {
	var r client.Reader = c.Client
	if c.APIReader != nil {
		r = c.APIReader
	}
	s := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", outcome.Waiting(outcome.WaitingForCredential, "Secret %s/%s does not exist", ref.Namespace, ref.Name)
		}
		return nil, "", fmt.Errorf("reading Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	v, ok := s.Data[ref.Key]
	if !ok || len(v) == 0 {
		return nil, "", outcome.Waiting(outcome.WaitingForCredential, "Secret %s/%s has no key %q", ref.Namespace, ref.Name, ref.Key)
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
