// Package vault is the operator's narrow view of Vault: the few endpoints
// it reads and writes, behind an interface the controllers depend on, with
// one implementation over hashicorp/vault/api and a fake for unit tests.
//
// Nothing here imports Kubernetes; the controllers turn a VaultConnection
// and its Secrets into a Config. Tokens and secret IDs never appear in
// errors or logs.
package vault

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/minionvault/minion-vault-operator/pkg/vault/internal/rules"
)

// CanonicalCIDR writes a CIDR block as Vault answers token_bound_cidrs
// (go-sockaddr's String): a single address without its /32 or /128, IPv6
// in its compressed form, host bits kept; text that is not an address
// stays as it is, trimmed.
func CanonicalCIDR(s string) string {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Bits() == p.Addr().BitLen() {
			return p.Addr().String()
		}
		return p.Addr().String() + "/" + strconv.Itoa(p.Bits())
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	return s
}

// Client is what the controllers may do in Vault. Reads of absent objects
// return nil (or "", false) and no error.
type Client interface {
	// ServerInfo is what sys/seal-status says of the server: its version,
	// and its cluster ID, which changes when Vault is initialised anew (a
	// dev server restarted, storage lost).
	ServerInfo(ctx context.Context) (ServerInfo, error)
	// CheckToken looks up the client's own token (auth/token/lookup-self),
	// logging in again if Vault refuses it: an error means the operator's
	// credentials do not work now.
	CheckToken(ctx context.Context) error
	// MountAccessor returns the accessor of the auth method at mount
	// (sys/auth), e.g. for "salt-minions"; "" when nothing is mounted
	// there. Accessors never change while a mount exists, so clients may
	// answer from a cache, which AuthMounts refreshes.
	MountAccessor(ctx context.Context, authMount string) (string, error)
	// AuthMounts reads sys/auth: the auth methods by mount path (without
	// the trailing "/"), with their type and accessor.
	AuthMounts(ctx context.Context) (map[string]AuthMount, error)

	// ReadRole reads auth/<mount>/role/<name>; nil when absent.
	ReadRole(ctx context.Context, mount, name string) (map[string]any, error)
	WriteRole(ctx context.Context, mount, name string, params map[string]any) error
	DeleteRole(ctx context.Context, mount, name string) error
	// ReadRoleID reads auth/<mount>/role/<name>/role-id; "" when absent.
	ReadRoleID(ctx context.Context, mount, name string) (string, error)

	// ReadEntityByName reads identity/entity/name/<name>; nil when absent.
	ReadEntityByName(ctx context.Context, name string) (*Entity, error)
	// WriteEntityByName creates or updates identity/entity/name/<name>
	// with exactly this metadata (Vault replaces the whole map). It returns
	// the new entity's ID when Vault created it, and "" when it updated an
	// existing one (whose ID the caller read before).
	WriteEntityByName(ctx context.Context, name string, metadata map[string]string) (createdID string, err error)
	DeleteEntityByName(ctx context.Context, name string) error
	// LookupEntityByAlias finds the entity that holds the alias named name
	// on the auth mount with mountAccessor (POST identity/lookup/entity);
	// nil when no alias of that name exists there. It tells whose login an
	// AppRole role's role ID leads to.
	LookupEntityByAlias(ctx context.Context, name, mountAccessor string) (*Entity, error)

	// CreateEntityAlias posts identity/entity-alias and returns the
	// alias's ID. Vault keeps one alias per name and mount: when one
	// exists already (a minion's login created it on an entity of its
	// own), the post moves it to canonicalID instead of creating a second.
	// An entity has at most one alias per mount: a second is refused (400).
	CreateEntityAlias(ctx context.Context, name, mountAccessor, canonicalID string) (string, error)
	// UpdateEntityAlias renames an alias or points it at another entity
	// (empty arguments keep the alias's value).
	UpdateEntityAlias(ctx context.Context, id, name, mountAccessor, canonicalID string) error
	DeleteEntityAlias(ctx context.Context, id string) error

	// ReadPolicy reads sys/policies/acl/<name>.
	ReadPolicy(ctx context.Context, name string) (hcl string, found bool, err error)
	WritePolicy(ctx context.Context, name, hcl string) error
	DeletePolicy(ctx context.Context, name string) error
	// ListPolicies lists the ACL policy names (LIST sys/policies/acl), to
	// find the policies the operator wrote (their ownership header says
	// so) when it has no record of them: after a restart, or to delete a
	// template's policies.
	ListPolicies(ctx context.Context) ([]string, error)

	// ListEntities lists the identity entities (LIST identity/entity/id):
	// their IDs, names and aliases (each alias's name and mount accessor),
	// not their metadata. ListRoles lists the AppRole roles of a mount
	// (LIST auth/<mount>/role). The sweep for lost minions finds there the
	// objects the operator wrote whose binding no longer exists, and which
	// entity each role's logins lead to, without a lookup per role. Both
	// are empty, not an error, when there are none.
	ListEntities(ctx context.Context) ([]Entity, error)
	ListRoles(ctx context.Context, mount string) ([]string, error)
}

// ServerInfo is a Vault server's identity.
type ServerInfo struct {
	Version   string
	ClusterID string
}

// AuthMount is one enabled auth method.
type AuthMount struct {
	Type     string // "approle", "kubernetes", "token", ...
	Accessor string
}

// Entity is an identity entity.
type Entity struct {
	ID       string
	Name     string
	Metadata map[string]string
	Aliases  []Alias
}

// Alias is an identity entity alias.
type Alias struct {
	ID            string
	Name          string
	MountAccessor string
	CanonicalID   string
}

// Config is how to reach and log in to one Vault.
type Config struct {
	Address            string
	CACert             []byte // PEM; nil: system roots
	ServerName         string
	InsecureSkipVerify bool
	Namespace          string // Vault Enterprise namespace header
	Timeout            time.Duration
	QPS                float64 // client-side rate limit; 0: none
	Burst              int
	Auth               Auth
}

// Auth is exactly one login method.
type Auth struct {
	Kubernetes *KubernetesAuth
	AppRole    *AppRoleAuth
	Token      string // a token from a Secret
}

// KubernetesAuth logs in with a service account token.
type KubernetesAuth struct {
	Mount string
	Role  string
	// JWT returns a fresh service account token (the controller uses the
	// TokenRequest API with the configured audiences).
	JWT func(ctx context.Context) (string, error)
}

// AppRoleAuth logs in with a role ID and secret ID.
type AppRoleAuth struct {
	Mount    string
	RoleID   string
	SecretID string
}

// TokenLeaser is implemented by the clients New returns (not by every
// Client: fakes need not). TokenLease says when the client's current token
// expires and its usual lease, the figure it renews or logs in again
// against when a third of it is left; a zero expires: the token never
// expires (a root token), or there is none yet.
type TokenLeaser interface {
	TokenLease() (expires time.Time, lease time.Duration)
}

// Observer receives what the client does, for metrics and tests. op is
// "read", "write", "delete", "list" or "login"; path has no secrets (it is
// the API path with the minion name, never a token); code is the HTTP
// status, 0 for a transport error.
type Observer interface {
	Request(op, path string, code int, d time.Duration)
	Login(method string, err error)
}

// Error is an error response from Vault (or the transport), classified.
type Error struct {
	Op         string // e.g. "write auth/salt-minions/role/web01"
	StatusCode int    // 0 for transport errors
	Messages   []string
	Err        error
}

func (e *Error) Error() string {
	msg := e.Op
	if e.StatusCode != 0 {
		msg += ": HTTP " + strconv.Itoa(e.StatusCode)
	}
	for _, m := range e.Messages {
		msg += ": " + m
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ErrInvalid marks errors found before anything is sent to Vault: a Config
// that cannot work (no address, no or two login methods, a CA bundle without
// certificates) or a name that would change the API path ("..", "/" in a
// role or entity name). Retrying does not help; fixing the input does.
var ErrInvalid = rules.ErrInvalid

// ErrIncompleteResponse marks an answer whose body cannot be decoded: cut
// short (a connection dropped mid-body by a proxy or load balancer, a
// server that stopped while writing) or not JSON at all. It says nothing
// about the request, so it is transient: asking again can succeed, while
// stalling would wait for an edit that fixes nothing.
var ErrIncompleteResponse = errors.New("incomplete response")

// ErrClosed is returned by a client after Close.
var ErrClosed = errors.New("vault client closed")

// Transient reports whether retrying later can help: transport errors,
// answers that cannot be read (ErrIncompleteResponse, whatever their
// status), 5xx, 429, 412 (eventual consistency) and a redirect that was not
// followed (3xx: a standby's, see followRedirect), as opposed to
// 400/403/404 and ErrInvalid.
func Transient(err error) bool {
	if errors.Is(err, ErrInvalid) {
		return false
	}
	if errors.Is(err, ErrIncompleteResponse) {
		return true
	}
	var ve *Error
	if !errors.As(err, &ve) {
		return true
	}
	// A redirect not followed (a standby's to the active node, when it
	// would change the method or downgrade to http) is Vault's HA state.
	redirect := ve.StatusCode >= 300 && ve.StatusCode < 400
	return ve.StatusCode == 0 || ve.StatusCode >= 500 || ve.StatusCode == 429 || ve.StatusCode == 412 || redirect
}

// Denied reports whether Vault refused the operator's own token, or its
// policy does not allow the call (HTTP 401 or 403). That is not the
// binding's fault: a rotated Secret or a fixed operator policy cures it, so
// controllers retry it with backoff although it is not Transient.
func Denied(err error) bool {
	var ve *Error
	if !errors.As(err, &ve) {
		return false
	}
	// A login with a wrong secret ID or role ID is a 400.
	login := ve.StatusCode == 400 && strings.HasPrefix(ve.Op, OpLogin+" ")
	return ve.StatusCode == 401 || ve.StatusCode == 403 || login
}
