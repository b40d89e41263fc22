package mastercheck

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/internal/importer"
)

// FuzzMasterCheck: any master configuration gives findings or an error,
// never a panic, and the configuration written for it is issue only.
func FuzzMasterCheck(f *testing.F) {
	f.Add([]byte("vault:\n  issue:\n    type: approle\n    approle:\n      params:\n        token_num_uses: 5\npeer_run:\n  .*: [vault.get_config]\n"))
	f.Add([]byte("vault:\n  issue:\n    approle:\n      params: null\n      mount: [x]\n"))
	f.Add([]byte("vault:\n  issue:\n    wrap: {a: 1}\n    approle:\n      params:\n        token_ttl: 1.5d\n        bind_secret_id: 'no'\npeer_run: {'(': [1]}\n"))
	f.Add([]byte("vault: [1, 2]\n"))
	tpl := &Template{Name: "t", Mount: "salt-minions", BindSecretID: true, Role: roleDefaults()}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(importer.File{Name: "fuzz.conf", Data: data})
		if err != nil {
			return
		}
		if _, _, err := m.Check([]*Template{tpl}); err != nil {
			return
		}
		out, err := Config(m, tpl)
		if err != nil {
			return
		}
		again, err := Parse(importer.File{Name: "written.conf", Data: out})
		if err != nil {
			t.Fatalf("the written configuration does not parse: %v\n%s", err, out)
		}
		if _, fs, err := again.Check([]*Template{tpl}); err == nil && Fights(fs) > 0 {
			t.Fatalf("the written configuration fights: %+v\n%s", fs, out)
		}
	})
}
