package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/minionvault/minion-vault-operator/internal/manifest"
	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

// What plan reads: the manifests, and how to reach Vault.

// readPlanInput reads every manifest of the files and folders.
func readPlanInput(paths []string) (*planInput, error) {
	m, err := manifest.ReadSet(paths, nil)
	if err != nil {
		return nil, err
	}
	return &planInput{Set: m}, nil
}

// planVaultConfig is the VaultConnection of the first template (when it is
// among the manifests), overridden by flags and the usual VAULT_*
// variables, with the credentials from flags or the environment.
func planVaultConfig(o planOptions, in *planInput) (vault.Config, error) {
	cfg := vault.Config{Timeout: 30 * time.Second}
	if conn, ok := in.Connections[in.Templates[0].Obj.Spec.ConnectionRef.Name]; ok {
		cfg.Address, cfg.Namespace = conn.Spec.Address, conn.Spec.Namespace
		if t := conn.Spec.TLS; t != nil {
			cfg.ServerName, cfg.InsecureSkipVerify = t.ServerName, t.InsecureSkipVerify
		}
		if conn.Spec.Timeout != nil {
			cfg.Timeout = conn.Spec.Timeout.Duration
		}
	}
	override := func(dst *string, flag, env string) {
		if flag != "" {
			*dst = flag
		} else if v := os.Getenv(env); v != "" && *dst == "" {
			*dst = v
		}
	}
	override(&cfg.Address, o.address, "VAULT_ADDR")
	override(&cfg.Namespace, o.namespace, "VAULT_NAMESPACE")
	if o.serverName != "" {
		cfg.ServerName = o.serverName
	}
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || o.skipVerify
	if cfg.Address == "" {
		return cfg, errors.New("no Vault address: set --address or VAULT_ADDR, or include the templates' VaultConnection")
	}
	caFile := o.caCert
	if caFile == "" {
		caFile = os.Getenv("VAULT_CACERT")
	}
	if caFile != "" {
		ca, err := os.ReadFile(caFile)
		if err != nil {
			return cfg, err
		}
		cfg.CACert = ca
	}
	secretFile := func(file, env string) (string, error) {
		if file == "" {
			return os.Getenv(env), nil
		}
		b, err := os.ReadFile(file)
		return strings.TrimSpace(string(b)), err
	}
	if o.roleID != "" {
		sid, err := secretFile(o.secretIDFile, "VAULT_SECRET_ID")
		if err != nil {
			return cfg, err
		}
		cfg.Auth.AppRole = &vault.AppRoleAuth{Mount: o.appRoleMount, RoleID: o.roleID, SecretID: sid}
		return cfg, nil
	}
	if o.k8sRole != "" {
		jwtFile := o.jwtFile
		cfg.Auth.Kubernetes = &vault.KubernetesAuth{Mount: o.k8sMount, Role: o.k8sRole, JWT: func(context.Context) (string, error) {
			b, err := os.ReadFile(jwtFile)
			return strings.TrimSpace(string(b)), err
		}}
		return cfg, nil
	}
	tok, err := secretFile(o.tokenFile, "VAULT_TOKEN")
	if err != nil {
		return cfg, err
	}
	if tok == "" {
		return cfg, errors.New("no Vault credentials: set VAULT_TOKEN or --token-file, --role-id with --secret-id-file, or --kubernetes-role")
	}
	cfg.Auth.Token = tok
	return cfg, nil
}
