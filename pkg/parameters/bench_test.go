package parameters

import (
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// benchFiles is a vault formula's parameter tree of realistic size.
var benchFiles = map[string]string{
	"parameters/map_jinja.yaml": `
values:
  sources:
    - Y:G@osarch
    - Y:G@os_family
    - Y:G@os
    - Y:G@osfinger
    - C@vault:lookup
    - C@vault
    - Y:G@id
`,
	"vault/parameters/map_jinja.yaml": `
strategy: smart
values:
  formula_version: 2
`,
	"vault/parameters/defaults.yaml": `
values:
  pkg:
    name: vault
    version: latest
    repo:
      humanname: HashiCorp
      key_url: https://apt.releases.hashicorp.com/gpg
      enabled: true
  rootuser: root
  rootgroup: root
  user: vault
  group: vault
  service:
    name: vault
    enable: true
    restart_on_change: true
    limits: {nofile: 65536, memlock: infinity}
  paths:
    conf: /etc/vault.d
    data: /var/lib/vault
    logs: /var/log/vault
    plugins: /usr/local/lib/vault/plugins
    tls: /etc/vault.d/tls
  config:
    ui: true
    disable_mlock: false
    api_addr: https://vault.example.net:8200
    cluster_addr: https://vault.example.net:8201
    log_level: info
    log_format: standard
    default_lease_ttl: 768h
    max_lease_ttl: 8760h
    listener:
      tcp:
        address: 0.0.0.0:8200
        cluster_address: 0.0.0.0:8201
        tls_disable: false
        tls_cert_file: /etc/vault.d/tls/vault.crt
        tls_key_file: /etc/vault.d/tls/vault.key
        tls_min_version: tls12
        telemetry: {unauthenticated_metrics_access: false}
    storage:
      raft:
        path: /var/lib/vault/raft
        node_id: default
        retry_join: []
        performance_multiplier: 1
    seal: {}
    telemetry:
      prometheus_retention_time: 30s
      disable_hostname: true
  policies:
    - default
    - admin
    - minion
  auth_methods: [approle, cert, token]
  secrets_engines:
    kv: {path: secret, version: 2}
    pki: {path: pki, max_lease_ttl: 87600h}
    transit: {path: transit}
  audit:
    file: {path: /var/log/vault/audit.log, log_raw: false}
  tofs:
    files_switch: [id, roles, osfinger, os, os_family]
  winner: defaults
`,
	"vault/parameters/osarch/amd64.yaml": `
values:
  arch: amd64
  pkg: {arch: amd64}
`,
	"vault/parameters/osarch/arm64.yaml": `
values: {arch: arm64}
`,
	"vault/parameters/os_family/Debian.yaml": `
values:
  pkg:
    repo:
      name: deb [arch=amd64 signed-by=/usr/share/keyrings/hashicorp.gpg] https://apt.releases.hashicorp.com bookworm main
      file: /etc/apt/sources.list.d/hashicorp.list
  service: {limits: {nofile: 131072}}
  paths: {plugins: /usr/lib/vault/plugins}
  winner: os_family
`,
	"vault/parameters/os_family/RedHat.yaml": `
values:
  pkg: {repo: {baseurl: https://rpm.releases.hashicorp.com/RHEL/$releasever/$basearch/stable}}
`,
	"vault/parameters/os/Debian.yaml": `
values:
  config: {log_format: json}
  winner: os
`,
	"vault/parameters/os/Ubuntu.yaml": `
values: {config: {log_format: standard}}
`,
	"vault/parameters/osfinger/Debian-12.yaml": `
values:
  pkg: {version: 1.17.2}
  winner: osfinger
`,
	"vault/parameters/id/vault-1.example.net.yaml": `
strategy: recurse
merge_lists: true
values:
  config:
    api_addr: https://vault-1.example.net:8200
    cluster_addr: https://vault-1.example.net:8201
    storage: {raft: {node_id: vault-1}}
  policies: [vault-1]
  winner: id
`,
}

const benchGrains = `
id: vault-1.example.net
host: vault-1
domain: example.net
fqdn: vault-1.example.net
nodename: vault-1
localhost: vault-1
kernel: Linux
kernelrelease: 6.1.0-21-amd64
kernelversion: '#1 SMP PREEMPT_DYNAMIC Debian 6.1.90-1 (2024-05-03)'
os: Debian
os_family: Debian
osarch: amd64
osfinger: Debian-12
osfullname: Debian GNU/Linux
osrelease: '12'
osrelease_info: [12]
oscodename: bookworm
osmajorrelease: 12
cpuarch: x86_64
num_cpus: 4
num_gpus: 0
mem_total: 7941
swap_total: 0
virtual: kvm
init: systemd
systemd: {version: '252', features: +PAM +AUDIT +SELINUX}
shell: /bin/sh
locale_info: {defaultlanguage: en_US, defaultencoding: UTF-8, detectedencoding: utf-8, timezone: UTC}
ipv4: [127.0.0.1, 10.0.12.21]
ipv6: ['::1', 'fe80::5054:ff:fe12:3456']
fqdn_ip4: [10.0.12.21]
fqdn_ip6: []
dns: {nameservers: [10.0.0.2], domain: example.net, search: [example.net], options: []}
hwaddr_interfaces: {eth0: '52:54:00:12:34:56', lo: '00:00:00:00:00:00'}
ip_interfaces: {eth0: [10.0.12.21], lo: [127.0.0.1]}
roles: [vault, monitored]
saltversion: 3007.1
saltversioninfo: [3007, 1]
pythonversion: [3, 11, 2, final, 0]
path: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
machine_id: 0d4c3a7e2b1f4a5c9e8d7f6a5b4c3d2e
uid: 0
gid: 0
username: root
groupname: root
`

const benchPillar = `
vault:
  lookup:
    pkg: {version: 1.17.3}
    master: salt.example.net
  config:
    seal:
      transit:
        address: https://vault-transit.example.net:8200
        key_name: autounseal
        mount_path: transit/
        tls_skip_verify: false
    storage:
      raft:
        retry_join:
          - leader_api_addr: https://vault-1.example.net:8200
          - leader_api_addr: https://vault-2.example.net:8200
          - leader_api_addr: https://vault-3.example.net:8200
  policies: [ops]
  tofs:
    source_files:
      vault-config-file-file-managed: [vault.hcl.jinja]
  winner: pillar
monitoring:
  prometheus: {scrape: true, port: 9102}
  alerts: [vault_sealed, vault_leader_lost]
users:
  alice: {uid: 2001, groups: [ops, vault]}
  bob: {uid: 2002, groups: [dev]}
ntp:
  servers: [0.debian.pool.ntp.org, 1.debian.pool.ntp.org]
`

// BenchmarkStackDefault runs the default 7-source stack over ten parameter
// files with realistic grains and pillar.
func BenchmarkStackDefault(b *testing.B) {
	in := Input{
		Root:   "vault",
		Files:  make(map[string]value.Value, len(benchFiles)),
		Grains: y(b, benchGrains),
		Pillar: y(b, benchPillar),
		Opts:   y(b, "{__cli: salt-minion, file_client: remote, master: salt.example.net}"),
	}
	for p, doc := range benchFiles {
		in.Files[p] = y(b, doc)
	}
	res, err := Stack(in)
	if err != nil {
		b.Fatal(err)
	}
	if w, _ := res.Mapdata.GetString("winner"); w.Str() != "id" || len(res.FilesTried) != 8 {
		b.Fatalf("unexpected result: winner %s, %d files tried", w.PyRepr(), len(res.FilesTried))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Stack(in); err != nil {
			b.Fatal(err)
		}
	}
}
