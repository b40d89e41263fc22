#!/usr/bin/env python3
"""Record what saltext-vault's master-side issuing code sends to Vault.

One-off generator for internal/testing/saltmaster/testdata/saltext-issue-trace.json,
the expectations of internal/testing/saltmaster/trace_test.go (and of
internal/saltext/params_test.go's param vectors). It runs the REAL
saltext-vault code, not a re-implementation:

  * runners/vault.py (get_config, generate_secret_id, generate_token,
    sync_approles, sync_entities, cleanup_auth, _manage_approle,
    _manage_entity, _manage_entity_alias) on the master side, and
  * utils/vault/{api,client,auth,factory,helpers,kv,leases,cache}.py for the
    HTTP payloads, the master's own client and the minion side (unwrap with
    the creation_path check, AppRole login, KV v2 read).

Only `salt` itself is stubbed (sys.modules): immutabletypes.freeze,
data.traverse_dict, defaults.NOT_SET, the exception classes, json,
dictupdate (Salt's merge/update, transcribed), and a dict-backed
salt.cache.factory with Salt's Cache.cache expiry rule (`if not data or
expired`, so a falsy value is never served from cache) on an injectable
clock. The runner's _validate_signature keeps its block_minion_requests
check but skips the signature crypto; _get_minion_data returns the case's
scripted grains and pillar; saltext.vault.utils.versions.warn_until is a
no-op. Requests are recorded at the transport adapter
(client.VaultAPIAdapter.send), after `requests` has prepared them: method,
path, X-Vault-Wrap-TTL, X-Vault-Namespace, X-Vault-Token and the exact body
bytes. A scripted fake Vault answers them (404/403/400 like Vault); the same
fake is mirrored in Go (internal/testing/saltmaster/fakevault.go) and the trace
keeps its answers, so a divergence of the two fakes shows as such.

Besides the cases, the file holds table-test vectors computed by saltext's
own functions: param_vectors (_parse_issue_params and
_approle_params_match on edge configurations, the expectations of
params_test.go) and json_vectors (json.dumps with and without
ensure_ascii).

Where saltext iterates a set (sync_approles, sync_entities, cleanup_auth,
_approle_params_match), CPython's order depends on string hashing, so the
runner module's `set` is replaced by a set that iterates in sorted order;
the Go port iterates sorted too. The clock starts at 2026-01-01T00:00:00Z
and only moves when a case says so, so re-running reproduces the file byte
for byte.

Run from the repository root (python3 >= 3.10 with `requests` importable;
no Salt needed):

    python3 hack/saltext/issue_trace.py [SALTEXT_SRC] \\
        > internal/testing/saltmaster/testdata/saltext-issue-trace.json

SALTEXT_SRC is the `src` directory of a saltext-vault checkout (default
/work/shared/reference/saltext-vault/src). The committed trace was produced
against saltext-vault v1.8.0 (tag 33c62cdaa04bb49458353487db3ee71c79bf2edd;
the files used are identical at 74c8871cc0cd).
"""

import argparse
import copy
import datetime
import importlib
import json
import logging
import os
import re
import sys
import tempfile
import types
import urllib.parse

SALTEXT_VERSION = "1.8.0"
START = 1767225600  # 2026-01-01T00:00:00Z
URL = "http://vault.test:8200"
MOUNT = "salt-minions"
ACCESSOR = "auth_approle_0c1f2d3e"
MASTER_TOKEN = "hvs.master-token"


# --------------------------------------------------------------------------
# Clock


class Clock:
    """The one clock every stub and the fake Vault read."""

    def __init__(self):
        self.now = START

    def time(self):
        return float(self.now)


CLOCK = Clock()


class FakeTimeModule(types.ModuleType):
    """Replaces `time` inside saltext's leases/cache modules."""

    def __init__(self):
        super().__init__("time")

    def time(self):
        return CLOCK.time()


# --------------------------------------------------------------------------
# salt stubs


def install_salt_stubs():
    # Salt's logging setup adds TRACE (5) and GARBAGE (1) levels.
    for name, level in (("trace", 5), ("garbage", 1)):
        logging.addLevelName(level, name.upper())
        setattr(
            logging.Logger,
            name,
            lambda self, msg, *args, _level=level, **kwargs: self.log(_level, msg, *args, **kwargs),
        )

    def mod(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, m)
        return m

    class SaltException(Exception):
        # salt/exceptions.py: str(err) is the message
        def __init__(self, message=""):
            if not isinstance(message, str):
                message = str(message)
            super().__init__(message)
            self.message = self.strerror = message

    class SaltInvocationError(SaltException, TypeError):
        pass

    excs = {"SaltException": SaltException, "SaltInvocationError": SaltInvocationError}
    for name in (
        "SaltRunnerError",
        "AuthenticationError",
        "InvalidConfigError",
        "CommandExecutionError",
        "SaltCacheError",
        "SaltRenderError",
    ):
        excs[name] = type(name, (SaltException,), {})

    class _NotSet:
        def __repr__(self):
            return "<NOT_SET>"

    not_set = _NotSet()

    def freeze(obj):
        if isinstance(obj, dict):
            return types.MappingProxyType({k: freeze(v) for k, v in obj.items()})
        if isinstance(obj, list):
            return tuple(freeze(v) for v in obj)
        return obj

    def traverse_dict(data, key, default=None, delimiter=":"):
        # salt/utils/data.py traverse_dict
        ptr = data
        try:
            for each in key.split(delimiter):
                ptr = ptr[each]
        except (KeyError, IndexError, TypeError):
            return default
        return ptr

    def traverse_dict_and_list(data, key, default=None, delimiter=":"):
        ptr = data
        for each in key.split(delimiter):
            if isinstance(ptr, list):
                try:
                    ptr = ptr[int(each)]
                except (ValueError, IndexError):
                    return default
            else:
                try:
                    ptr = ptr[each]
                except (KeyError, TypeError):
                    return default
        return ptr

    # salt/utils/dictupdate.py, transcribed (update, merge_recurse, merge
    # with strategy "smart" and renderer "yaml").
    from collections.abc import Mapping

    def update(dest, upd, recursive_update=True, merge_lists=False):
        if (not isinstance(dest, Mapping)) or (not isinstance(upd, Mapping)):
            raise TypeError("Cannot update using non-dict types in dictupdate.update()")
        updkeys = list(upd.keys())
        if not set(list(dest.keys())) & set(updkeys):
            recursive_update = False
        if recursive_update:
            for key in updkeys:
                val = upd[key]
                try:
                    dest_subkey = dest.get(key, None)
                except AttributeError:
                    dest_subkey = None
                if isinstance(dest_subkey, Mapping) and isinstance(val, Mapping):
                    ret = update(dest_subkey, val, merge_lists=merge_lists)
                    dest[key] = ret
                elif isinstance(dest_subkey, list) and isinstance(val, list):
                    if merge_lists:
                        merged = copy.deepcopy(dest_subkey)
                        merged.extend([x for x in val if x not in merged])
                        dest[key] = merged
                    else:
                        dest[key] = upd[key]
                else:
                    dest[key] = upd[key]
            return dest
        for k in upd:
            dest[k] = upd[k]
        return dest

    def merge(obj_a, obj_b, strategy="smart", renderer="yaml", merge_lists=False):
        if strategy not in ("smart", "recurse"):
            raise NotImplementedError(strategy)
        return update(copy.deepcopy(obj_a), obj_b, merge_lists=merge_lists)

    def set_dict_key_value(in_dict, keys, value, delimiter=":"):
        parts = keys.split(delimiter)
        ptr = in_dict
        for part in parts[:-1]:
            ptr = ptr.setdefault(part, {})
        ptr[parts[-1]] = value
        return in_dict

    def json_dumps(obj, **kwargs):
        # salt/utils/json.py dumps: ensure_ascii defaults to False
        kwargs.pop("_json_module", None)
        if "ensure_ascii" not in kwargs:
            kwargs["ensure_ascii"] = False
        return json.dumps(obj, **kwargs)

    def json_loads(s, **kwargs):
        kwargs.pop("_json_module", None)
        return json.loads(s, **kwargs)

    class DictCache:
        """salt.cache.Cache over one dict, with Salt's cache() expiry rule."""

        store_data = {}

        def __init__(self, opts, **kwargs):
            self.opts = opts

        def cache(self, bank, key, fun, loop_fun=None, **kwargs):
            # salt/cache/__init__.py Cache.cache
            expire_seconds = kwargs.get("expire", 86400)
            updated = self.updated(bank, key)
            update_cache = False
            if updated is None:
                update_cache = True
            elif int(CLOCK.time()) - updated > expire_seconds:
                update_cache = True
            data = self.fetch(bank, key)
            if not data or update_cache is True:
                if loop_fun is not None:
                    data = [loop_fun(item) for item in fun(**kwargs)]
                else:
                    data = fun(**kwargs)
                self.store(bank, key, data)
            return data

        def store(self, bank, key, data):
            # localfs serialises with msgpack: keep a copy, not the object
            DictCache.store_data[(bank, key)] = (int(CLOCK.time()), copy.deepcopy(data))

        def fetch(self, bank, key):
            item = DictCache.store_data.get((bank, key))
            return {} if item is None else copy.deepcopy(item[1])

        def updated(self, bank, key):
            item = DictCache.store_data.get((bank, key))
            return None if item is None else item[0]

        def flush(self, bank, key=None):
            for bk in list(DictCache.store_data):
                if (key is None and (bk[0] == bank or bk[0].startswith(bank + "/"))) or bk == (
                    bank,
                    key,
                ):
                    del DictCache.store_data[bk]
            return True

        def contains(self, bank, key=None):
            if key is None:
                return any(b == bank for b, _ in DictCache.store_data)
            return (bank, key) in DictCache.store_data

        def list(self, bank):
            return sorted(k for b, k in DictCache.store_data if b == bank)

    def unused(*args, **kwargs):
        raise RuntimeError("not stubbed: the trace must not reach this")

    mod("salt")
    mod("salt.exceptions", **excs)
    mod("salt.defaults", NOT_SET=not_set)
    mod("salt.utils")
    mod("salt.utils.immutabletypes", freeze=freeze)
    mod("salt.utils.data", traverse_dict=traverse_dict, traverse_dict_and_list=traverse_dict_and_list)
    mod("salt.utils.dictupdate", update=update, merge=merge, set_dict_key_value=set_dict_key_value)
    mod("salt.utils.json", dumps=json_dumps, loads=json_loads)
    mod("salt.utils.minions", get_minion_data=unused)
    mod("salt.utils.context", func_globals_inject=unused)
    mod("salt.utils.event", get_event=unused)
    mod("salt.utils.sdb", sdb_get=unused)
    mod("salt.utils.atomicfile", atomic_open=unused)
    mod("salt.utils.files", fopen=unused)
    mod("salt.cache", factory=DictCache, Cache=DictCache)
    mod("salt.crypt", verify_signature=unused, sign_message=unused)
    mod("salt.pillar", get_pillar=unused)
    mod("salt.state", STATE_INTERNAL_KEYWORDS=frozenset())
    mod("salt.modules")
    mod("salt.modules.publish", runner=unused)
    mod("salt.modules.saltutil", runner=unused)
    return DictCache


class SortedSet(set):
    """A set iterating in sorted order, so set-driven loops are reproducible."""

    def __iter__(self):
        return iter(sorted(set.__iter__(self)))

    def __and__(self, other):
        return SortedSet(set.__and__(self, other))

    def __sub__(self, other):
        return SortedSet(set.__sub__(self, other))


# --------------------------------------------------------------------------
# The fake Vault (mirrored by internal/testing/saltmaster/fakevault.go)


def iso(ts):
    """Vault's RFC 3339 timestamps, with the sub-second part saltext strips."""
    dt = datetime.datetime.fromtimestamp(int(ts), tz=datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ".123456789Z"


ROLE_DEFAULTS = {
    "bind_secret_id": True,
    "local_secret_ids": False,
    "secret_id_bound_cidrs": None,
    "secret_id_num_uses": 0,
    "secret_id_ttl": 0,
    "token_bound_cidrs": [],
    "token_explicit_max_ttl": 0,
    "token_max_ttl": 0,
    "token_no_default_policy": False,
    "token_num_uses": 0,
    "token_period": 0,
    "token_policies": [],
    "token_ttl": 0,
    "token_type": "default",
}
ROLE_INT_FIELDS = ("secret_id_num_uses", "token_num_uses")
ROLE_TTL_FIELDS = (
    "secret_id_ttl",
    "token_explicit_max_ttl",
    "token_max_ttl",
    "token_period",
    "token_ttl",
)
DEFAULT_TOKEN_TTL = 2764800  # Vault's default max lease TTL, 768h
DENIED = "1 error occurred:\n\t* permission denied\n\n"

# Policies of the master token (spec §2.3 and saltext's quickstart).
POLICIES = {
    "issue-only": [
        {"path": f"auth/{MOUNT}/role/+", "capabilities": ["read"]},
        {"path": f"auth/{MOUNT}/role/+/role-id", "capabilities": ["read"]},
        {"path": f"auth/{MOUNT}/role/+/secret-id", "capabilities": ["update"]},
    ],
    "quickstart": [
        {"path": f"auth/{MOUNT}/role", "capabilities": ["list"]},
        {"path": f"auth/{MOUNT}/role/*", "capabilities": ["read", "create", "update", "delete"]},
        {"path": f"sys/auth/{MOUNT}", "capabilities": ["read", "sudo"]},
        {"path": "identity/entity/name/salt_minion_*", "capabilities": ["read", "create", "update", "delete"]},
        {"path": "identity/entity-alias", "capabilities": ["create", "update"]},
        {"path": "identity/lookup/entity", "capabilities": ["create", "update"]},
    ],
    # Minion policies: the operator's rendering and the master's default
    # policies:assign (saltstack/minions, saltstack/{minion}).
    "minion-kv": [
        {"path": "secret/data/salt/*", "capabilities": ["read"]},
    ],
    "saltstack/minions": [
        {"path": "secret/data/salt/common/*", "capabilities": ["read"]},
    ],
    "saltstack/web01": [
        {"path": "secret/data/salt/minions/web01", "capabilities": ["read"]},
    ],
}


class VaultError(Exception):
    def __init__(self, status, errors=None):
        super().__init__(status)
        self.status = status
        self.errors = [] if errors is None else errors


def parse_duration(val):
    """Vault's TypeDurationSecond: an int, or a Go-style duration string."""
    if isinstance(val, bool):
        raise VaultError(400, ["invalid duration"])
    if isinstance(val, int):
        return val
    if isinstance(val, float) and val == int(val):
        return int(val)
    if isinstance(val, str):
        if re.fullmatch(r"-?\d+", val):
            return int(val)
        m = re.fullmatch(r"(\d+)([smhd])", val)
        if m:
            return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    raise VaultError(400, [f"error converting input {json.dumps(val)} for field: invalid duration"])


def parse_int(val):
    if isinstance(val, bool):
        raise VaultError(400, ["invalid integer"])
    if isinstance(val, int):
        return val
    if isinstance(val, float) and val == int(val):
        return int(val)
    if isinstance(val, str) and re.fullmatch(r"-?\d+", val):
        return int(val)
    raise VaultError(400, [f"error converting input {json.dumps(val)} for field: invalid integer"])


def parse_bool(val):
    if isinstance(val, bool):
        return val
    if isinstance(val, str) and val.lower() in ("true", "false", "1", "0"):
        return val.lower() in ("true", "1")
    if isinstance(val, int):
        return val != 0
    raise VaultError(400, [f"error converting input {json.dumps(val)} for field: invalid boolean"])


def parse_string_list(val):
    """TypeCommaStringSlice: a list, or a comma-separated string."""
    if val is None:
        return []
    if isinstance(val, str):
        return [s.strip() for s in val.split(",") if s.strip()]
    if isinstance(val, list):
        return [str(s) for s in val]
    raise VaultError(400, ["invalid string list"])


def canonical_cidr(cidr):
    """sockaddr's String(): a single host keeps no mask."""
    if cidr.endswith("/32") and ":" not in cidr:
        return cidr[:-3]
    if cidr.endswith("/128") and ":" in cidr:
        return cidr[:-4]
    return cidr


def glob_match(rule, path):
    """Vault ACL paths: '+' is one segment, a trailing '*' a prefix."""
    prefix = rule.endswith("*")
    if prefix:
        rule = rule[:-1]
    pattern = "/".join("[^/]+" if seg == "+" else re.escape(seg) for seg in rule.split("/"))
    return re.fullmatch(pattern + (".*" if prefix else ""), path) is not None


class FakeVault:
    """Just enough Vault for saltext's issuing calls. Deterministic: every
    identifier comes from one counter, every timestamp from CLOCK."""

    def __init__(self, state, policies):
        self.s = state
        self.policies = policies

    # ---- identifiers ----
    def next_n(self):
        self.s["counter"] += 1
        return self.s["counter"]

    def new_uuid(self):
        n = self.next_n()
        return f"{n:08x}-0000-4000-8000-{n:012x}"

    def new_token(self, kind):
        return f"hvs.{kind}{self.next_n():06d}"

    # ---- helpers ----
    def role(self, mount, name):
        return self.s["roles"].get(mount, {}).get(name)

    def entity_by_name(self, name):
        for e in self.s["entities"]:
            if e["name"] == name:
                return e
        return None

    def entity_by_id(self, eid):
        for e in self.s["entities"]:
            if e["id"] == eid:
                return e
        return None

    def alias_by_factors(self, accessor, name):
        for e in self.s["entities"]:
            for a in e["aliases"]:
                if a["mount_accessor"] == accessor and a["name"] == name:
                    return e, a
        return None, None

    def alias_by_id(self, aid):
        for e in self.s["entities"]:
            for a in e["aliases"]:
                if a["id"] == aid:
                    return e, a
        return None, None

    def mount_of_accessor(self, accessor):
        for mount, m in self.s["approle_mounts"].items():
            if m["accessor"] == accessor:
                return mount
        return None

    def entity_view(self, e):
        return {
            "aliases": [self.alias_view(a, e) for a in e["aliases"]],
            "disabled": e["disabled"],
            "id": e["id"],
            "metadata": e["metadata"] or None,
            "name": e["name"],
            "policies": e["policies"],
        }

    def alias_view(self, a, e):
        mount = self.mount_of_accessor(a["mount_accessor"])
        return {
            "canonical_id": e["id"],
            "custom_metadata": a["custom_metadata"],
            "id": a["id"],
            "metadata": a["metadata"] or None,
            "mount_accessor": a["mount_accessor"],
            "mount_path": f"auth/{mount}/",
            "mount_type": "approle",
            "name": a["name"],
        }

    # ---- tokens and ACL ----
    def token(self, tok):
        t = self.s["tokens"].get(tok)
        if t is None:
            return None
        if t["expire_time"] and CLOCK.now >= t["expire_time"]:
            del self.s["tokens"][tok]
            return None
        return t

    def capabilities(self, t, path):
        if "root" in t["policies"]:
            return {"root"}
        caps = set()
        for name in t["policies"]:
            for rule in self.policies.get(name, []):
                if glob_match(rule["path"], path):
                    caps.update(rule["capabilities"])
        if "deny" in caps:
            return set()
        return caps

    def authorize(self, headers, method, path, exists):
        """Token check, ACL check and use accounting of one request."""
        t = self.token(headers.get("X-Vault-Token", ""))
        if t is None:
            raise VaultError(403, ["permission denied"])
        if path != "auth/token/lookup-self":
            need = {
                "GET": ["read"],
                "LIST": ["list"],
                "DELETE": ["delete"],
                "POST": ["update"] if exists is None or exists else ["create"],
            }[method]
            if path.startswith("sys/auth/"):
                need = need + ["sudo"]
            caps = self.capabilities(t, path)
            if "root" not in caps and not all(c in caps for c in need):
                raise VaultError(403, [DENIED])
        if t["num_uses"]:
            t["uses"] += 1
            if t["uses"] >= t["num_uses"]:
                del self.s["tokens"][headers["X-Vault-Token"]]
        return t

    def issue_token(self, policies, token_policies, meta, ttl, num_uses, entity_id, renewable=True):
        tok = self.new_token("token")
        accessor = self.new_uuid()
        self.s["tokens"][tok] = {
            "accessor": accessor,
            "creation_time": CLOCK.now,
            "display_name": "token",
            "entity_id": entity_id,
            "expire_time": CLOCK.now + ttl if ttl else 0,
            "meta": meta,
            "num_uses": num_uses,
            "policies": policies,
            "renewable": renewable,
            "ttl": ttl,
            "uses": 0,
        }
        return {
            "accessor": accessor,
            "client_token": tok,
            "entity_id": entity_id,
            "lease_duration": ttl,
            "metadata": meta,
            "num_uses": num_uses,
            "orphan": False,
            "policies": policies,
            "renewable": renewable,
            "token_policies": token_policies,
            "token_type": "service",
        }

    # ---- responses ----
    @staticmethod
    def envelope(data=None, auth=None, wrap_info=None):
        return {
            "auth": auth,
            "data": data,
            "lease_duration": 0,
            "lease_id": "",
            "renewable": False,
            "warnings": None,
            "wrap_info": wrap_info,
        }

    def maybe_wrap(self, headers, path, resp):
        ttl = headers.get("X-Vault-Wrap-TTL")
        if not ttl:
            return 200, resp
        secs = parse_duration(ttl)
        tok = self.new_token("wrap")
        self.s["wrapped"][tok] = {
            "creation_path": path,
            "creation_time": CLOCK.now,
            "creation_ttl": secs,
            "response": resp,
        }
        wrapped_accessor = (resp.get("data") or {}).get("secret_id_accessor") or (resp.get("auth") or {}).get("accessor") or ""
        return 200, self.envelope(
            wrap_info={
                "accessor": self.new_uuid(),
                "creation_path": path,
                "creation_time": iso(CLOCK.now),
                "token": tok,
                "ttl": secs,
                "wrapped_accessor": wrapped_accessor,
            }
        )

    def wrapped(self, tok):
        w = self.s["wrapped"].get(tok)
        if w is None or CLOCK.now >= w["creation_time"] + w["creation_ttl"]:
            self.s["wrapped"].pop(tok, None)
            raise VaultError(400, ["wrapping token is not valid or does not exist"])
        return w

    def handle(self, method, path, headers, body):
        """Answers one request: (status, JSON object or None)."""
        try:
            return self.route(method, path, headers, body)
        except VaultError as err:
            return err.status, {"errors": err.errors}

    def route(self, method, path, headers, body):
        m = re.fullmatch(r"auth/([^/]+)/(.*)", path)
        if m and m.group(1) in self.s["approle_mounts"]:
            return self.approle(method, m.group(1), m.group(2), path, headers, body)
        if path == "auth/token/lookup-self" and method == "GET":
            t = self.authorize(headers, method, path, None)
            return 200, self.envelope(
                data={
                    "accessor": t["accessor"],
                    "creation_time": t["creation_time"],
                    "creation_ttl": t["ttl"],
                    "display_name": t["display_name"],
                    "entity_id": t["entity_id"],
                    "expire_time": iso(t["expire_time"]) if t["expire_time"] else None,
                    "explicit_max_ttl": 0,
                    "id": headers["X-Vault-Token"],
                    "meta": t["meta"],
                    "num_uses": t["num_uses"],
                    "orphan": True,
                    "path": "auth/token/create",
                    "policies": t["policies"],
                    "renewable": t["renewable"],
                    "ttl": t["expire_time"] - CLOCK.now if t["expire_time"] else 0,
                    "type": "service",
                }
            )
        if re.fullmatch(r"auth/token/create(/[^/]+)?", path) and method == "POST":
            self.authorize(headers, method, path, None)
            return self.maybe_wrap(headers, path, self.token_create(body))
        if path == "sys/wrapping/lookup" and method == "POST":
            w = self.wrapped((body or {}).get("token") or headers.get("X-Vault-Token", ""))
            return 200, self.envelope(
                data={
                    "creation_path": w["creation_path"],
                    "creation_time": iso(w["creation_time"]),
                    "creation_ttl": w["creation_ttl"],
                }
            )
        if path == "sys/wrapping/unwrap" and method == "POST":
            tok = (body or {}).get("token") or headers.get("X-Vault-Token", "")
            w = self.wrapped(tok)
            del self.s["wrapped"][tok]
            return 200, w["response"]
        m = re.fullmatch(r"sys/auth/([^/]+)", path)
        if m and method == "GET":
            self.authorize(headers, method, path, None)
            mount = self.s["approle_mounts"].get(m.group(1))
            if mount is None:
                raise VaultError(400, [f"No auth engine at {m.group(1)}"])
            return 200, self.envelope(
                data={"accessor": mount["accessor"], "description": "", "local": False, "type": "approle"}
            )
        if path.startswith("identity/"):
            return self.identity(method, path, headers, body)
        m = re.fullmatch(r"sys/internal/ui/mounts/(.+)", path)
        if m and method == "GET":
            if self.token(headers.get("X-Vault-Token", "")) is None:
                raise VaultError(403, ["permission denied"])
            for mount, kv in sorted(self.s["kv_mounts"].items()):
                if m.group(1) == mount or m.group(1).startswith(mount + "/"):
                    return 200, self.envelope(
                        data={
                            "description": "",
                            "options": {"version": kv["version"]},
                            "path": mount + "/",
                            "type": "kv",
                        }
                    )
            raise VaultError(400, ["no mount found for path"])
        for mount, kv in sorted(self.s["kv_mounts"].items()):
            if path.startswith(mount + "/") and method == "GET":
                self.authorize(headers, method, path, None)
                rest = path[len(mount) + 1 :]
                if kv["version"] == "2":
                    if not rest.startswith("data/"):
                        raise VaultError(404, [])
                    rest = rest[len("data/") :]
                secret = self.s["kv"].get(f"{mount}/{rest}")
                if secret is None:
                    raise VaultError(404, [])
                if kv["version"] != "2":
                    return 200, self.envelope(data=secret)
                meta = {
                    "created_time": iso(START),
                    "custom_metadata": None,
                    "deletion_time": "",
                    "destroyed": False,
                    "version": 1,
                }
                return 200, self.envelope(data={"data": secret, "metadata": meta})
        self.authorize(headers, method, path, None)
        raise VaultError(404, [f'no handler for route "{path}". route entry not found.'])

    # ---- auth/<approle mount>/... ----
    def approle(self, method, mount, sub, path, headers, body):
        roles = self.s["roles"].setdefault(mount, {})
        if sub == "login" and method == "POST":
            return self.login(mount, body or {})
        if sub == "role" and method == "LIST":
            self.authorize(headers, method, path, None)
            if not roles:
                raise VaultError(404, [])
            return 200, self.envelope(data={"keys": sorted(roles)})
        m = re.fullmatch(r"role/([^/]+)", sub)
        if m:
            name = m.group(1)
            role = roles.get(name)
            if method == "GET":
                self.authorize(headers, method, path, None)
                if role is None:
                    raise VaultError(404, [])
                return 200, self.envelope(data=dict(sorted(role["params"].items())))
            if method == "POST":
                self.authorize(headers, method, path, role is not None)
                return self.role_write(roles, name, role, body or {})
            if method == "DELETE":
                self.authorize(headers, method, path, None)
                roles.pop(name, None)
                self.s["secret_ids"] = [s for s in self.s["secret_ids"] if not (s["mount"] == mount and s["role"] == name)]
                return 204, None
        m = re.fullmatch(r"role/([^/]+)/role-id", sub)
        if m and method == "GET":
            self.authorize(headers, method, path, None)
            role = roles.get(m.group(1))
            if role is None:
                raise VaultError(404, [])
            return self.maybe_wrap(headers, path, self.envelope(data={"role_id": role["role_id"]}))
        m = re.fullmatch(r"role/([^/]+)/secret-id", sub)
        if m and method == "POST":
            self.authorize(headers, method, path, None)
            role = roles.get(m.group(1))
            if role is None:
                raise VaultError(404, [f'role "{m.group(1)}" does not exist'])
            if not role["params"]["bind_secret_id"]:
                raise VaultError(400, ["bind_secret_id is not set on the role"])
            raw = (body or {}).get("metadata", "")
            try:
                metadata = json.loads(raw) if raw else {}
            except ValueError:
                raise VaultError(400, ["failed to parse metadata"]) from None
            sid = {
                "accessor": self.new_uuid(),
                "creation_time": CLOCK.now,
                "metadata": metadata,
                "mount": mount,
                "num_uses": role["params"]["secret_id_num_uses"],
                "role": m.group(1),
                "secret_id": self.new_uuid(),
                "ttl": role["params"]["secret_id_ttl"],
                "uses": 0,
            }
            self.s["secret_ids"].append(sid)
            data = {
                "secret_id": sid["secret_id"],
                "secret_id_accessor": sid["accessor"],
                "secret_id_num_uses": sid["num_uses"],
                "secret_id_ttl": sid["ttl"],
            }
            return self.maybe_wrap(headers, path, self.envelope(data=data))
        self.authorize(headers, method, path, None)
        raise VaultError(404, [f'no handler for route "{path}". route entry not found.'])

    def role_write(self, roles, name, role, body):
        params = copy.deepcopy(ROLE_DEFAULTS if role is None else role["params"])
        for key, val in body.items():
            if key not in ROLE_DEFAULTS:
                continue  # Vault ignores unknown fields (with a warning)
            if key in ROLE_TTL_FIELDS:
                params[key] = parse_duration(val)
            elif key in ROLE_INT_FIELDS:
                params[key] = parse_int(val)
            elif key in ("bind_secret_id", "token_no_default_policy", "local_secret_ids"):
                if key == "local_secret_ids" and role is not None:
                    continue
                params[key] = parse_bool(val)
            elif key == "token_bound_cidrs":
                params[key] = [canonical_cidr(c) for c in parse_string_list(val)]
            elif key in ("secret_id_bound_cidrs", "token_policies"):
                params[key] = parse_string_list(val)
            else:
                params[key] = str(val)
        if not (params["bind_secret_id"] or params["secret_id_bound_cidrs"] or params["token_bound_cidrs"]):
            raise VaultError(400, ["at least one constraint should be enabled on the role"])
        if role is None:
            roles[name] = {"params": params, "role_id": self.new_uuid()}
        else:
            role["params"] = params
        return 204, None

    def login(self, mount, body):
        role_name = None
        for name, r in sorted(self.s["roles"][mount].items()):
            if r["role_id"] == body.get("role_id"):
                role_name, role = name, r
        if role_name is None:
            raise VaultError(400, ["invalid role or secret ID"])
        meta = {}
        if role["params"]["bind_secret_id"]:
            sid = None
            for s in self.s["secret_ids"]:
                if s["mount"] == mount and s["role"] == role_name and s["secret_id"] == body.get("secret_id"):
                    sid = s
            if sid is None or (sid["ttl"] and CLOCK.now >= sid["creation_time"] + sid["ttl"]):
                raise VaultError(400, ["invalid role or secret ID"])
            sid["uses"] += 1
            if sid["num_uses"] and sid["uses"] >= sid["num_uses"]:
                self.s["secret_ids"].remove(sid)
            meta = dict(sid["metadata"])
        meta["role_name"] = role_name
        accessor = self.s["approle_mounts"][mount]["accessor"]
        entity, alias = self.alias_by_factors(accessor, role["role_id"])
        if entity is None:
            entity = {
                "aliases": [],
                "disabled": False,
                "id": self.new_uuid(),
                "metadata": {},
                "name": "",
                "policies": [],
            }
            entity["name"] = "entity_" + entity["id"][:8]
            alias = {
                "custom_metadata": {},
                "id": self.new_uuid(),
                "metadata": {},
                "mount_accessor": accessor,
                "name": role["role_id"],
            }
            entity["aliases"].append(alias)
            self.s["entities"].append(entity)
        alias["metadata"] = meta
        p = role["params"]
        token_policies = list(p["token_policies"])
        policies = sorted(set(token_policies + ([] if p["token_no_default_policy"] else ["default"])))
        ttl = p["token_ttl"] or DEFAULT_TOKEN_TTL
        if p["token_explicit_max_ttl"]:
            ttl = min(ttl, p["token_explicit_max_ttl"])
        auth = self.issue_token(policies, token_policies, meta, ttl, p["token_num_uses"], entity["id"])
        return 200, self.envelope(auth=auth)

    def token_create(self, body):
        body = body or {}
        policies = parse_string_list(body.get("policies"))
        no_default = parse_bool(body.get("no_default_policy", False))
        token_policies = sorted(set(policies + ([] if no_default else ["default"])))
        ttl = parse_duration(body.get("explicit_max_ttl") or body.get("ttl") or DEFAULT_TOKEN_TTL)
        num_uses = parse_int(body.get("num_uses", 0))
        renewable = parse_bool(body.get("renewable", True))
        auth = self.issue_token(
            token_policies, token_policies, body.get("meta") or None, ttl, num_uses, "", renewable
        )
        return self.envelope(auth=auth)

    # ---- identity/... ----
    def identity(self, method, path, headers, body):
        body = body or {}
        if path == "identity/entity/name" and method == "LIST":
            self.authorize(headers, method, path, None)
            if not self.s["entities"]:
                raise VaultError(404, [])
            return 200, self.envelope(data={"keys": sorted(e["name"] for e in self.s["entities"])})
        m = re.fullmatch(r"identity/entity/name/([^/]+)", path)
        if m:
            name = m.group(1)
            self.authorize(headers, method, path, None)
            e = self.entity_by_name(name)
            if method == "GET":
                if e is None:
                    raise VaultError(404, [])
                return 200, self.envelope(data=self.entity_view(e))
            if method == "DELETE":
                if e is not None:
                    self.s["entities"].remove(e)
                return 204, None
            if method == "POST":
                created = e is None
                if created:
                    e = {"aliases": [], "disabled": False, "id": self.new_uuid(), "metadata": {}, "name": name, "policies": []}
                    self.s["entities"].append(e)
                if "metadata" in body:
                    meta = body["metadata"] or {}
                    if not isinstance(meta, dict):
                        raise VaultError(400, ["invalid metadata"])
                    e["metadata"] = {k: str(v) for k, v in meta.items()}
                if "policies" in body:
                    e["policies"] = parse_string_list(body["policies"])
                if "disabled" in body:
                    e["disabled"] = parse_bool(body["disabled"])
                if not created:
                    return 204, None
                return 200, self.envelope(data={"aliases": None, "id": e["id"], "name": e["name"]})
        if path == "identity/entity-alias" and method == "POST":
            self.authorize(headers, method, path, None)
            return self.alias_write(body)
        if path == "identity/lookup/entity" and method == "POST":
            self.authorize(headers, method, path, None)
            e, _ = self.alias_by_factors(body.get("alias_mount_accessor"), body.get("alias_name"))
            if e is None:
                return 204, None
            return 200, self.envelope(data=self.entity_view(e))
        self.authorize(headers, method, path, None)
        raise VaultError(404, [f'no handler for route "{path}". route entry not found.'])

    def alias_write(self, body):
        # vault/identity_store_aliases.go handleAliasCreateUpdate, reduced
        name = body.get("name", "")
        accessor = body.get("mount_accessor", "")
        canonical = body.get("canonical_id", "")
        if not isinstance(name, str):
            raise VaultError(400, ["invalid alias name"])
        if body.get("id"):
            cur, alias = self.alias_by_id(body["id"])
            if alias is None:
                raise VaultError(400, ["invalid alias ID provided"])
            name = name or alias["name"]
            accessor = accessor or alias["mount_accessor"]
            return self.alias_update(cur, alias, canonical, name, accessor)
        if not accessor or not name:
            raise VaultError(400, ["'id' or 'mount_accessor' and 'name' must be provided"])
        if self.mount_of_accessor(accessor) is None:
            raise VaultError(400, [f'invalid mount accessor "{accessor}"'])
        cur, alias = self.alias_by_factors(accessor, name)
        if alias is not None:
            return self.alias_update(cur, alias, canonical, name, accessor)
        target = self.entity_by_id(canonical)
        if target is None:
            raise VaultError(400, ["invalid canonical ID"])
        if any(a["mount_accessor"] == accessor for a in target["aliases"]):
            raise VaultError(400, ["Alias already exists for requested entity and mount accessor"])
        alias = {"custom_metadata": {}, "id": self.new_uuid(), "metadata": {}, "mount_accessor": accessor, "name": name}
        target["aliases"].append(alias)
        return 200, self.envelope(data={"canonical_id": target["id"], "id": alias["id"]})

    def alias_update(self, cur, alias, canonical, name, accessor):
        if name == alias["name"] and accessor == alias["mount_accessor"] and canonical in ("", cur["id"]):
            return 204, None
        if name != alias["name"] or accessor != alias["mount_accessor"]:
            if self.mount_of_accessor(accessor) is None:
                raise VaultError(400, [f'invalid mount accessor "{accessor}"'])
            _, other = self.alias_by_factors(accessor, name)
            if other is not None and other["id"] != alias["id"]:
                raise VaultError(400, ["alias with combination of mount accessor and name already exists"])
            alias["name"], alias["mount_accessor"] = name, accessor
        target = cur
        if canonical and canonical != cur["id"]:
            target = self.entity_by_id(canonical)
            if target is None:
                raise VaultError(400, ["given 'canonical_id' is not associated with an entity"])
            if any(a["mount_accessor"] == accessor for a in target["aliases"]):
                raise VaultError(400, ["Alias cannot be updated as the given entity already has an alias for this mount "])
            cur["aliases"].remove(alias)
            target["aliases"].append(alias)
        return 200, self.envelope(data={"canonical_id": target["id"], "id": alias["id"]})

    # ---- out-of-band changes (the operator, an admin) ----
    def apply(self, change):
        kind = change["change"]
        if kind == "set_role_params":
            role = self.s["roles"][MOUNT].get(change["minion"])
            if role is not None:
                role["params"].update(change["params"])
        elif kind == "delete_role":
            self.s["roles"][MOUNT].pop(change["minion"], None)
        elif kind == "set_entity_metadata":
            self.entity_by_name(change["entity"])["metadata"] = dict(change["metadata"])
        else:
            raise ValueError(kind)


def new_state(roles=(), entities=(), master_policies=("root",), kv=None):
    """A normalised fake Vault state: what a case starts from."""
    s = {
        "approle_mounts": {MOUNT: {"accessor": ACCESSOR}},
        "counter": 0,
        "entities": [],
        "kv": kv or {},
        "kv_mounts": {"secret": {"version": "2"}},
        "roles": {MOUNT: {}},
        "secret_ids": [],
        "tokens": {
            MASTER_TOKEN: {
                "accessor": "master-accessor",
                "creation_time": START - 86400,
                "display_name": "root",
                "entity_id": "",
                "expire_time": 0,
                "meta": None,
                "num_uses": 0,
                "policies": list(master_policies),
                "renewable": False,
                "ttl": 0,
                "uses": 0,
            }
        },
        "wrapped": {},
    }
    fake = FakeVault(s, POLICIES)
    for name, params in roles:
        params = dict(params)
        role_id = params.pop("role_id", None) or fake.new_uuid()
        status, _ = fake.role_write(s["roles"][MOUNT], name, None, params)
        assert status == 204, (name, status)
        s["roles"][MOUNT][name]["role_id"] = role_id
    for ent in entities:
        e = {
            "aliases": [],
            "disabled": False,
            "id": fake.new_uuid(),
            "metadata": dict(ent.get("metadata", {})),
            "name": ent["name"],
            "policies": [],
        }
        for role in ent.get("alias_roles", ()):
            e["aliases"].append(
                {
                    "custom_metadata": {},
                    "id": fake.new_uuid(),
                    "metadata": {},
                    "mount_accessor": ACCESSOR,
                    "name": s["roles"][MOUNT][role]["role_id"],
                }
            )
        s["entities"].append(e)
    return s


# --------------------------------------------------------------------------
# Transport: record what `requests` puts on the wire, answer from the fake


class Recorder:
    def __init__(self):
        self.fake = None
        self.requests = []

    def send(self, adapter, request, **kwargs):  # pylint: disable=unused-argument
        import requests  # pylint: disable=import-outside-toplevel

        url = urllib.parse.urlsplit(request.url)
        if f"{url.scheme}://{url.netloc}" != URL or not url.path.startswith("/v1/"):
            raise RuntimeError(f"unexpected URL {request.url}")
        body = request.body
        if isinstance(body, str):
            body = body.encode()
        rec = {"method": request.method, "path": url.path + (f"?{url.query}" if url.query else "")}
        for header, field in (
            ("X-Vault-Wrap-TTL", "wrap_ttl"),
            ("X-Vault-Namespace", "namespace"),
            ("X-Vault-Token", "token"),
        ):
            if header in request.headers:
                rec[field] = request.headers[header]
        if body is not None:
            rec["body"] = body.decode("utf-8")
        parsed = json.loads(body) if body else None
        status, payload = self.fake.handle(
            request.method, url.path[len("/v1/") :], dict(request.headers), parsed
        )
        rec["status"] = status
        content = b""
        if payload is not None:
            # The trace keeps what carries information; saltext sees it all.
            rec["response"] = {k: v for k, v in payload.items() if k in ("auth", "data", "errors", "wrap_info") and v is not None}
            content = json.dumps(payload, sort_keys=True).encode()
        self.requests.append(rec)

        res = requests.models.Response()
        res.status_code = status
        res._content = content  # pylint: disable=protected-access
        res.headers = requests.structures.CaseInsensitiveDict({"Content-Type": "application/json"})
        res.url = request.url
        res.request = request
        res.reason = {200: "OK", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}.get(status, "")
        res.encoding = "utf-8"
        return res

    def take(self):
        out, self.requests = self.requests, []
        return out


# --------------------------------------------------------------------------
# Loading saltext


class Saltext:
    def __init__(self, src):
        self.cache_cls = install_salt_stubs()
        versions = types.ModuleType("saltext.vault.utils.versions")
        versions.warn_until = lambda *args, **kwargs: None
        sys.modules["saltext.vault.utils.versions"] = versions
        sys.path.insert(0, src)
        self.runner = importlib.import_module("saltext.vault.runners.vault")
        self.vault = importlib.import_module("saltext.vault.utils.vault")
        self.client = importlib.import_module("saltext.vault.utils.vault.client")
        self.auth = importlib.import_module("saltext.vault.utils.vault.auth")
        self.leases = importlib.import_module("saltext.vault.utils.vault.leases")
        self.cache = importlib.import_module("saltext.vault.utils.vault.cache")
        self.kv = importlib.import_module("saltext.vault.utils.vault.kv")
        self.leases.time = FakeTimeModule()
        self.cache.time = FakeTimeModule()
        self.recorder = Recorder()
        recorder = self.recorder

        def send(adapter, request, **kwargs):
            return recorder.send(adapter, request, **kwargs)

        self.client.VaultAPIAdapter.send = send
        self.runner.set = SortedSet
        self.orig_validate = self.runner._validate_signature  # pylint: disable=protected-access

    def start_case(self, case, pki_dir):
        r = self.runner
        self.cache_cls.store_data.clear()
        r.__opts__ = {
            "__role": "master",
            "cachedir": pki_dir,
            "id": "salt-master",
            "pki_dir": pki_dir,
            "sock_dir": pki_dir,
            "vault": copy.deepcopy(case["master_config"]),
        }
        r.__context__ = {}
        r.__salt__ = {}
        for dunder, key in (("__jid__", "jid"), ("__user__", "user")):
            if key in case["salt"]:
                setattr(r, dunder, case["salt"][key])
            elif hasattr(r, dunder):
                delattr(r, dunder)
        minions = case["salt"]["minions"]

        def get_minion_data(minion_id, refresh_pillar=None):  # pylint: disable=unused-argument
            data = minions.get(minion_id, {})
            return copy.deepcopy(data.get("grains", {"id": minion_id})), copy.deepcopy(data.get("pillar", {}))

        def validate_signature(minion_id, signature, impersonated_by_master):  # pylint: disable=unused-argument
            # runners/vault.py _validate_signature without the crypto
            if not impersonated_by_master and r._config("issue:block_minion_requests"):  # pylint: disable=protected-access
                raise sys.modules["salt.exceptions"].AuthenticationError(
                    "Non-impersonated requests have been disabled in the config"
                )

        r._get_minion_data = get_minion_data  # pylint: disable=protected-access
        r._validate_signature = validate_signature  # pylint: disable=protected-access

    def impersonate(self, minion_id):
        opts = self.runner.__opts__
        opts.pop("minion_id", None)
        opts.pop("grains", None)
        if minion_id is not None:
            opts["minion_id"] = minion_id
            opts["grains"] = {"id": minion_id}


# --------------------------------------------------------------------------
# Steps


def error_text(err):
    return f"{type(err).__name__}: {err}"


class MinionSide:
    """What a minion does with the master's answers: factory.py
    _query_master's unwrapping and _build_authd_client's AppRole login, then
    pillar reads through kv.py, all with saltext's own classes."""

    def __init__(self, sx):
        self.sx = sx
        self.config = {}  # minion -> latest get_config return
        self.secret = {}  # minion -> latest generate_secret_id return
        self.token = {}  # minion -> VaultToken
        self.context = {}

    def login(self, minion):
        sx = self.sx
        cfg = self.config.get(minion)
        if not cfg or "error" in cfg:
            return {"skipped": "no configuration from the master"}
        auth = cfg["auth"]
        config = {"auth": {"approle_mount": auth["approle_mount"], "approle_name": auth["approle_name"]}}
        client = sx.client.VaultClient(**cfg["server"])
        role_id = auth["role_id"]
        if isinstance(role_id, dict):
            wrapped = sx.leases.VaultWrappedResponse(**role_id["wrap_info"])
            role_id = client.unwrap(
                wrapped,
                expected_creation_path=sx.client._get_expected_creation_path("role_id", config),  # pylint: disable=protected-access
            )["data"]["role_id"]
        secret_id = None
        if auth["secret_id"]:
            ret = self.secret.get(minion)
            if not ret or "error" in ret:
                return {"skipped": "no secret ID from the master"}
            data = ret.get("data") or {}
            if ret.get("wrap_info"):
                data = client.unwrap(
                    sx.leases.VaultWrappedResponse(**ret["wrap_info"]),
                    expected_creation_path=sx.client._get_expected_creation_path("secret_id", config),  # pylint: disable=protected-access
                )["data"]
            for key, val in ret.get("misc_data", {}).items():
                data.setdefault(key, val)
            secret_id = sx.leases.VaultSecretId(**data)
        approle = sx.auth.VaultAppRole(role_id, secret_id)
        auth_obj = sx.auth.VaultAppRoleAuth(approle, client, mount=auth["approle_mount"])
        token = auth_obj.get_token()
        self.token[minion] = (token, cfg["server"])
        return {
            "client_token": str(token),
            "entity_id": token.entity_id,
            "lease_duration": token.duration,
            "num_uses": token.num_uses,
            "renewable": token.renewable,
        }

    def read(self, minion, path):
        sx = self.sx
        if minion not in self.token:
            return {"skipped": "not logged in"}
        token, server = self.token[minion]
        auth = sx.auth.VaultTokenAuth(token=token)
        client = sx.client.AuthenticatedVaultClient(auth, **server)
        cache = sx.cache.VaultCache(self.context, f"minions/{minion}/vault/connection", "secret_path_metadata")
        return sx.kv.VaultKV(client, cache).read(path)


def run_step(sx, minion_side, fake, step):
    r = sx.runner
    op = step["op"]
    out = {}
    minion = step.get("minion")
    if op in ("get_config", "generate_secret_id", "generate_token"):
        sx.impersonate(minion if step.get("impersonated") else None)
    else:
        sx.impersonate(None)
    try:
        if op == "advance":
            CLOCK.now += step["seconds"]
            return out
        if op == "vault_change":
            fake.apply(step)
            return out
        if op == "get_config":
            ret = r.get_config(minion, "sig", step["impersonated"], issue_params=step.get("issue_params"))
            minion_side.config[minion] = ret
        elif op == "generate_secret_id":
            ret = r.generate_secret_id(minion, "sig", step["impersonated"], issue_params=step.get("issue_params"))
            minion_side.secret[minion] = ret
        elif op == "generate_token":
            ret = r.generate_token(minion, "sig", step["impersonated"], ttl=step.get("ttl"), uses=step.get("uses"))
        elif op == "sync_approles":
            ret = r.sync_approles(minions=step.get("minions"))
        elif op == "sync_entities":
            ret = r.sync_entities(minions=step.get("minions"))
        elif op == "cleanup_auth":
            ret = r.cleanup_auth()
        elif op == "manage_approle":
            r._manage_approle(minion, step.get("issue_params"))  # pylint: disable=protected-access
            ret = True
        elif op == "manage_entity":
            r._manage_entity(minion)  # pylint: disable=protected-access
            ret = True
        elif op == "manage_entity_alias":
            r._manage_entity_alias(minion)  # pylint: disable=protected-access
            ret = True
        elif op == "login":
            ret = minion_side.login(minion)
        elif op == "read_pillar":
            ret = minion_side.read(minion, step["path"])
        else:
            raise ValueError(op)
        out["return"] = ret
    except Exception as err:  # pylint: disable=broad-except
        # What the runner raised (sync_*, cleanup_auth, the internal
        # steps, a refused signature) or what the minion side raised.
        out["raised"] = error_text(err)
    finally:
        sx.impersonate(None)
    return out


def run_case(sx, case):
    CLOCK.now = START
    state = copy.deepcopy(case["vault"])
    fake = FakeVault(state, POLICIES)
    sx.recorder.fake = fake
    with tempfile.TemporaryDirectory() as pki_dir:
        os.makedirs(os.path.join(pki_dir, "minions"))
        for minion in case["salt"]["known_minions"]:
            with open(os.path.join(pki_dir, "minions", minion), "w", encoding="utf-8") as f:
                f.write("key")
        sx.start_case(case, pki_dir)
        minion_side = MinionSide(sx)
        steps = []
        for step in case["steps"]:
            out = run_step(sx, minion_side, fake, step)
            rec = dict(step)
            rec["requests"] = sx.recorder.take()
            rec.update(out)
            steps.append(rec)
    out = {k: case[k] for k in ("name", "description", "master_config", "salt", "vault")}
    out["steps"] = steps
    out["final_vault"] = state
    return out


# --------------------------------------------------------------------------
# The matrix


def base_config(**overrides):
    cfg = {
        "auth": {"method": "token", "token": MASTER_TOKEN},
        "server": {"url": URL},
        "issue": {"type": "approle", "approle": {"mount": MOUNT}},
    }
    for path, val in overrides.items():
        ptr = cfg
        keys = path.split("__")
        for k in keys[:-1]:
            ptr = ptr.setdefault(k, {})
        ptr[keys[-1]] = val
    return cfg


SALT = {
    "jid": "20260101000000000001",
    "user": "root",
    "known_minions": ["db01", "web01"],
    "minions": {
        "web01": {
            "grains": {"id": "web01", "os": "Debian"},
            "pillar": {"roles": ["web", "Proxy"], "site": "Zürich", "env": "prod"},
        },
        "db01": {
            "grains": {"id": "db01", "os": "Debian"},
            "pillar": {"roles": ["db"], "site": "Bern", "env": "prod"},
        },
    },
}

TEMPLATING = {
    "policies": {"assign": ["saltstack/minions", "saltstack/{minion}", "saltstack/role/{pillar[roles]}"]},
    "metadata": {
        "entity": {"minion-id": "{minion}", "role": "{pillar[roles]}", "site": "{pillar[site]}"},
        "secret": {
            "saltstack-jid": "{jid}",
            "saltstack-minion": "{minion}",
            "saltstack-user": "{user}",
            "site": "{pillar[site]}",
        },
    },
}

# The master configurations of the matrix: name -> (vault: mapping, minion
# issue_params sent with every request, description).
NULLS = {
    "bind_secret_id": True,
    "secret_id_num_uses": None,
    "secret_id_ttl": None,
    "token_explicit_max_ttl": None,
    "token_num_uses": None,
}
OVERRIDES = {"token_num_uses": 5, "token_ttl": "1h", "bind_secret_id": False, "secret_id_num_uses": None}
CONFIGS = {
    "defaults": (base_config(), None, "saltext's defaults: only the required keys set"),
    "nulls": (
        base_config(issue__approle__params=dict(NULLS), issue__allow_minion_override_params=False, issue__wrap="30s", **{"metadata": TEMPLATING["metadata"], "policies": TEMPLATING["policies"]}),
        None,
        "the recommended issue-only configuration (spec §2.2)",
    ),
    "cidr-string": (
        base_config(issue__approle__params={"token_bound_cidrs": "10.0.0.0/8"}),
        None,
        "token_bound_cidrs as a string: never equals Vault's list",
    ),
    "cidr-32": (
        base_config(issue__approle__params={"token_bound_cidrs": ["10.0.0.1/32"]}),
        None,
        "token_bound_cidrs with /32: Vault answers 10.0.0.1",
    ),
    "no-default-policy": (
        base_config(issue__approle__params={"token_no_default_policy": True}),
        None,
        "token_no_default_policy: true",
    ),
    "override-on": (
        base_config(issue__allow_minion_override_params=True),
        OVERRIDES,
        "allow_minion_override_params with minion issue_params",
    ),
    "override-off": (
        base_config(issue__allow_minion_override_params=False),
        OVERRIDES,
        "minion issue_params ignored: overrides off",
    ),
    "bind-false": (
        base_config(issue__approle__params={"bind_secret_id": False, "secret_id_bound_cidrs": ["10.1.0.0/16"]}),
        None,
        "bind_secret_id: false (with a CIDR constraint, else Vault refuses the role)",
    ),
}

# What the operator's role looks like, per config: matching holds what the
# master would write (so its check passes), mismatching differs in
# token_num_uses and in policies.
OPERATOR_ROLE = {
    "bind_secret_id": True,
    "secret_id_num_uses": 1,
    "secret_id_ttl": 60,
    "token_explicit_max_ttl": 60,
    "token_num_uses": 10,
    "token_policies": ["minion-kv", "operator-rendered"],
}


def matching_role(config_name):
    role = dict(OPERATOR_ROLE)
    if config_name == "cidr-string":
        role["token_bound_cidrs"] = ["10.0.0.0/8"]
    elif config_name == "cidr-32":
        role["token_bound_cidrs"] = ["10.0.0.1/32"]
    elif config_name == "no-default-policy":
        role["token_no_default_policy"] = True
    elif config_name == "bind-false":
        role["bind_secret_id"] = False
        role["secret_id_bound_cidrs"] = ["10.1.0.0/16"]
    return role


def mismatching_role(config_name):
    role = matching_role(config_name)
    role["token_num_uses"] = 0
    role["secret_id_ttl"] = 600
    return role


def issue_steps(minion, impersonated, params, login=True):
    """The minion's requests, fresh, then within and past the 1 h cache."""
    common = {"minion": minion, "impersonated": impersonated, "issue_params": params}
    steps = [
        dict(op="get_config", **common),
        dict(op="generate_secret_id", **common),
    ]
    if login:
        steps += [
            {"op": "login", "minion": minion},
            {"op": "read_pillar", "minion": minion, "path": f"secret/salt/minions/{minion}"},
        ]
    steps += [
        {"op": "vault_change", "change": "set_role_params", "minion": minion, "params": {"token_num_uses": 0}, "note": "the operator sets token_num_uses (a drift correction)"},
        {"op": "advance", "seconds": 1800},
        dict(op="get_config", **common),
        dict(op="generate_secret_id", **common),
        {"op": "advance", "seconds": 1801},
        dict(op="get_config", **common),
        dict(op="generate_secret_id", **common),
    ]
    return steps


def kv_for(*minions):
    return {f"secret/salt/minions/{m}": {"password": f"{m}-secret", "city": "Zürich"} for m in minions}


def matrix_cases():
    cases = []
    for cname, (cfg, params, cdesc) in CONFIGS.items():
        for rname in ("present", "absent", "mismatching"):
            for imp in (False, True):
                roles = []
                entities = []
                if rname == "present":
                    roles = [("web01", matching_role(cname))]
                elif rname == "mismatching":
                    roles = [("web01", mismatching_role(cname))]
                if roles:
                    entities = [{"name": "salt_minion_web01", "metadata": {"minion-id": "web01", "minionvault-owner": "default/web01"}, "alias_roles": ["web01"]}]
                steps = issue_steps("web01", imp, params)
                cases.append(
                    {
                        "name": f"{cname}/{rname}/{'impersonated' if imp else 'peer-run'}",
                        "description": f"{cdesc}; role {rname}; {'master impersonating the minion' if imp else 'minion peer run'}",
                        "master_config": cfg,
                        "salt": SALT,
                        "vault": new_state(roles=roles, entities=entities, kv=kv_for("web01")),
                        "steps": steps,
                    }
                )
    return cases


def manual_cases():
    cases = []
    roles = [("web01", OPERATOR_ROLE), ("db01", OPERATOR_ROLE), ("stale01", OPERATOR_ROLE)]
    entities = [
        {"name": "salt_minion_web01", "metadata": {"minionvault-owner": "default/web01"}, "alias_roles": ["web01"]},
        {"name": "web01-custom", "metadata": {"minionvault-owner": "default/db01"}, "alias_roles": ["db01"]},
        {"name": "salt_minion_stale01", "metadata": {}, "alias_roles": ["stale01"]},
    ]
    cfg = base_config(**{"metadata": TEMPLATING["metadata"], "policies": TEMPLATING["policies"]})
    for policy in ("root", "quickstart", "issue-only"):
        cases.append(
            {
                "name": f"manual-runners/{policy}",
                "description": f"sync_approles, sync_entities, cleanup_auth with the master on the {policy} policy",
                "master_config": cfg,
                "salt": SALT,
                "vault": new_state(roles=roles, entities=entities, master_policies=[policy]),
                "steps": [
                    {"op": "sync_approles", "minions": None},
                    {"op": "sync_entities", "minions": None},
                    {"op": "sync_approles", "minions": ["web01", "new01"]},
                    {"op": "cleanup_auth"},
                ],
            }
        )
        cases.append(
            {
                "name": f"internal-steps/{policy}",
                "description": f"_manage_approle, _manage_entity, _manage_entity_alias called directly, {policy} policy",
                "master_config": cfg,
                "salt": SALT,
                "vault": new_state(roles=roles, entities=entities, master_policies=[policy]),
                "steps": [
                    {"op": "manage_approle", "minion": "web01", "issue_params": None},
                    {"op": "manage_entity", "minion": "web01"},
                    {"op": "manage_entity_alias", "minion": "web01"},
                    {"op": "manage_entity_alias", "minion": "db01"},
                    {"op": "manage_entity", "minion": "db01"},
                    {"op": "manage_entity_alias", "minion": "db01"},
                    {"op": "manage_approle", "minion": "new01", "issue_params": None},
                    {"op": "manage_entity_alias", "minion": "new01"},
                ],
            }
        )
        for itype in ("approle", "token"):
            tcfg = base_config(issue__type=itype, **{"policies": TEMPLATING["policies"], "metadata": TEMPLATING["metadata"]})
            cases.append(
                {
                    "name": f"generate-token/{itype}/{policy}",
                    "description": f"the deprecated generate_token with issue:type {itype}, {policy} policy",
                    "master_config": tcfg,
                    "salt": SALT,
                    "vault": new_state(roles=roles[:1], master_policies=[policy]),
                    "steps": [
                        {"op": "generate_token", "minion": "web01", "impersonated": False},
                        {"op": "generate_token", "minion": "web01", "impersonated": True, "ttl": "5m", "uses": 3},
                        {"op": "advance", "seconds": 61},
                        {"op": "generate_token", "minion": "db01", "impersonated": False, "ttl": 120},
                        {"op": "get_config", "minion": "db01", "impersonated": False, "issue_params": None},
                    ],
                }
            )
    return cases


def special_cases():
    cases = []
    roles = [("web01", OPERATOR_ROLE)]
    ents = [{"name": "salt_minion_web01", "metadata": {"minionvault-owner": "default/web01"}, "alias_roles": ["web01"]}]
    nulls = CONFIGS["nulls"][0]

    def add(name, desc, cfg, state, steps, salt=SALT):
        cases.append({"name": name, "description": desc, "master_config": cfg, "salt": salt, "vault": state, "steps": steps})

    add(
        "issue-only/present",
        "spec §2.2 configuration and §2.3 policy, binding Ready: the master only reads and issues",
        nulls,
        new_state(roles=roles, entities=ents, master_policies=["issue-only"], kv=kv_for("web01")),
        issue_steps("web01", False, None) + issue_steps("web01", True, None, login=False),
    )
    add(
        "issue-only/absent",
        "spec §2.3 policy, no role yet: get_config fails closed with a 403",
        nulls,
        new_state(master_policies=["issue-only"]),
        [
            {"op": "get_config", "minion": "new01", "impersonated": False, "issue_params": None},
            {"op": "generate_secret_id", "minion": "new01", "impersonated": False, "issue_params": None},
            {"op": "get_config", "minion": "new01", "impersonated": True, "issue_params": None},
        ],
    )
    add(
        "issue-only/mismatch",
        "spec §2.3 policy with saltext's default params against a differing role: the rewrite is a 403",
        base_config(),
        new_state(roles=[("web01", mismatching_role("defaults"))], entities=ents, master_policies=["issue-only"]),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "get_config", "minion": "web01", "impersonated": True, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": True, "issue_params": None},
        ],
    )
    add(
        "quickstart/role-deleted",
        "quickstart policy, role deleted by hand: get_config recreates role, replaces entity metadata, renames the alias",
        base_config(**{"metadata": TEMPLATING["metadata"], "policies": TEMPLATING["policies"]}),
        new_state(roles=roles, entities=ents, master_policies=["quickstart"], kv=kv_for("web01")),
        [
            {"op": "vault_change", "change": "delete_role", "minion": "web01"},
            {"op": "get_config", "minion": "web01", "impersonated": True, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": True, "issue_params": None},
            {"op": "login", "minion": "web01"},
            {"op": "read_pillar", "minion": "web01", "path": "secret/salt/minions/web01"},
            {"op": "read_pillar", "minion": "web01", "path": "secret/data/salt/minions/web01"},
            {"op": "read_pillar", "minion": "web01", "path": "secret/salt/minions/absent"},
        ],
    )
    add(
        "quickstart/custom-entity-name",
        "the operator's entity has a custom name and holds the alias: sync_entities creates salt_minion_web01 and moves the alias to it",
        base_config(**{"metadata": TEMPLATING["metadata"], "policies": TEMPLATING["policies"]}),
        new_state(
            roles=roles,
            entities=[{"name": "web01.example.com", "metadata": {"minionvault-owner": "default/web01"}, "alias_roles": ["web01"]}],
            master_policies=["quickstart"],
            kv=kv_for("web01"),
        ),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "sync_entities", "minions": ["web01"]},
            {"op": "login", "minion": "web01"},
            {"op": "read_pillar", "minion": "web01", "path": "secret/salt/minions/web01"},
            {"op": "read_pillar", "minion": "web01", "path": "secret/salt/minions/web01"},
        ],
    )
    add(
        "block-minion-requests",
        "issue:block_minion_requests refuses peer runs before anything else",
        base_config(issue__block_minion_requests=True),
        new_state(roles=roles, entities=ents),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "get_config", "minion": "web01", "impersonated": True, "issue_params": None},
        ],
    )
    add(
        "wrap-off",
        "issue:wrap false: role and secret IDs in the clear",
        base_config(issue__wrap=False),
        new_state(roles=[("web01", matching_role("defaults"))], entities=ents, kv=kv_for("web01")),
        issue_steps("web01", False, None)[:4],
    )
    add(
        "params-null",
        "issue:approle:params: null (the whole map): get_config fails",
        base_config(issue__approle__params=None),
        new_state(roles=roles, entities=ents),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": True, "issue_params": None},
        ],
    )
    add(
        "ttl-strings",
        "TTLs as time strings and floats: timestring_map turns them into int seconds",
        base_config(
            issue__approle__params={
                "secret_id_ttl": "2m",
                "token_explicit_max_ttl": "1.5h",
                "token_max_ttl": 7200.9,
                "token_period": "1d",
                "token_ttl": "90",
                "token_num_uses": "3",
            }
        ),
        new_state(),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
        ],
    )
    add(
        "ttl-invalid",
        "an invalid time string makes _parse_issue_params raise",
        base_config(issue__approle__params={"token_ttl": "1w"}),
        new_state(roles=roles, entities=ents),
        [
            {"op": "get_config", "minion": "web01", "impersonated": True, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": False, "issue_params": None},
        ],
    )
    add(
        "bind-false/unconstrained",
        "bind_secret_id false without CIDRs; a role deleted while its read is cached is not noticed for 1 h, then Vault refuses the master's role (400)",
        base_config(issue__approle__params={"bind_secret_id": False}),
        new_state(roles=[("web01", matching_role("bind-false"))], entities=ents),
        [
            {"op": "generate_secret_id", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "vault_change", "change": "delete_role", "minion": "web01"},
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "advance", "seconds": 3601},
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
        ],
    )
    add(
        "namespace-and-legacy-keys",
        "old-style keys (url, namespace at the top, policies as a list, auth:allow_minion_override) and a namespace header",
        {
            "url": URL,
            "namespace": "team-a",
            "auth": {"method": "token", "token": MASTER_TOKEN, "allow_minion_override": True},
            "issue": {"type": "approle"},
            "policies": ["saltstack/{minion}", "saltstack/{grains[os]}"],
            "metadata": {"entity": {"minion-id": "{minion}", "roles": "{pillar[roles]}", "roles__0": "fixed"}},
        },
        new_state(),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": {"token_ttl": 300, "token_policies": ["x"]}},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": False, "issue_params": "not-a-dict"},
        ],
    )
    add(
        "no-master-token",
        "a vault: mapping without auth:token: peer runs and manual runners raise, impersonated calls answer the error",
        {"server": {"url": URL}, "issue": {"type": "approle"}},
        new_state(roles=roles, entities=ents),
        [
            {"op": "get_config", "minion": "web01", "impersonated": False, "issue_params": None},
            {"op": "get_config", "minion": "web01", "impersonated": True, "issue_params": None},
            {"op": "generate_secret_id", "minion": "web01", "impersonated": True, "issue_params": None},
            {"op": "generate_token", "minion": "web01", "impersonated": True},
            {"op": "sync_approles", "minions": None},
            {"op": "cleanup_auth"},
            {"op": "manage_entity_alias", "minion": "web01"},
        ],
    )
    nojid = {k: v for k, v in SALT.items() if k not in ("jid", "user")}
    add(
        "no-jid",
        "no __jid__/__user__ in the runner's globals: metadata gets saltext's placeholders",
        nulls,
        new_state(roles=roles, entities=ents),
        [
            {"op": "generate_secret_id", "minion": "db01", "impersonated": False, "issue_params": None},
            {"op": "get_config", "minion": "db01", "impersonated": True, "issue_params": None},
        ],
        salt=nojid,
    )
    return cases


def all_cases():
    return matrix_cases() + manual_cases() + special_cases() + boundary_cases()


def boundary_cases():
    """Salt's Cache.cache refreshes when int(now) - updated > expire: a read
    exactly 3600 s old is still served."""
    roles = [("web01", mismatching_role("defaults"))]
    ents = [{"name": "salt_minion_web01", "metadata": {}, "alias_roles": ["web01"]}]
    common = {"minion": "web01", "impersonated": True, "issue_params": None}
    return [
        {
            "name": "cache-boundary",
            "description": "the approle_meta cache at exactly 3600 s (fresh) and 3601 s (expired)",
            "master_config": base_config(),
            "salt": SALT,
            "vault": new_state(roles=roles, entities=ents),
            "steps": [
                dict(op="get_config", **common),
                {"op": "advance", "seconds": 3600},
                dict(op="generate_secret_id", **common),
                {"op": "vault_change", "change": "delete_role", "minion": "web01"},
                dict(op="get_config", **common),
                {"op": "advance", "seconds": 1},
                dict(op="get_config", **common),
                dict(op="generate_secret_id", **common),
            ],
        }
    ]


# --------------------------------------------------------------------------
# Vectors for the table tests: saltext's own functions on edge inputs.

PARAM_BASE = {"auth": {"method": "token", "token": MASTER_TOKEN}, "server": {"url": URL}}


def pv(name, params=..., overrides=None, role=None, **issue):
    cfg = copy.deepcopy(PARAM_BASE)
    cfg["issue"] = {"type": "approle"}
    cfg["issue"].update(issue)
    if params is not ...:
        cfg["issue"]["approle"] = {"params": params}
    return {"name": name, "master_config": cfg, "overrides": overrides, "role": role}


# What Vault reads back for a role the master wrote with saltext's defaults.
VAULT_ROLE = {
    "bind_secret_id": True,
    "local_secret_ids": False,
    "secret_id_bound_cidrs": None,
    "secret_id_num_uses": 1,
    "secret_id_ttl": 60,
    "token_bound_cidrs": [],
    "token_explicit_max_ttl": 60,
    "token_max_ttl": 0,
    "token_no_default_policy": False,
    "token_num_uses": 10,
    "token_period": 0,
    "token_policies": ["saltstack/minions"],
    "token_ttl": 0,
    "token_type": "default",
}


def role(**changes):
    r = dict(VAULT_ROLE)
    r.update(changes)
    return r


PARAM_CASES = [
    pv("defaults against the role they wrote", role=role()),
    pv("defaults count when omitted: a role with Vault's defaults differs", role=role(secret_id_num_uses=0, secret_id_ttl=0, token_explicit_max_ttl=0, token_num_uses=0)),
    pv("nulls are neither sent nor compared", params=dict(NULLS), role=role(secret_id_num_uses=0, secret_id_ttl=600, token_num_uses=0)),
    pv("a whole params: null", params=None, role=role()),
    pv("CIDR string against Vault's list", params={"token_bound_cidrs": "10.0.0.0/8"}, role=role(token_bound_cidrs=["10.0.0.0/8"])),
    pv("CIDR /32 against Vault's canonical form", params={"token_bound_cidrs": ["10.0.0.1/32"]}, role=role(token_bound_cidrs=["10.0.0.1"])),
    pv("CIDR list as Vault has it", params={"token_bound_cidrs": ["10.0.0.1", "10.0.0.0/8"]}, role=role(token_bound_cidrs=["10.0.0.1", "10.0.0.0/8"])),
    pv("CIDR list in another order", params={"token_bound_cidrs": ["10.0.0.0/8", "10.0.0.1"]}, role=role(token_bound_cidrs=["10.0.0.1", "10.0.0.0/8"])),
    pv("secret_id_bound_cidrs string", params={"secret_id_bound_cidrs": "10.1.0.0/16"}, role=role(secret_id_bound_cidrs=["10.1.0.0/16"])),
    pv("token_no_default_policy true against false", params={"token_no_default_policy": True}, role=role()),
    pv("token_no_default_policy true against true", params={"token_no_default_policy": True}, role=role(token_no_default_policy=True)),
    pv("bind_secret_id is never compared", params={"bind_secret_id": False}, role=role()),
    pv("TTL strings become seconds", params={"secret_id_ttl": "1m", "token_explicit_max_ttl": "1.5h", "token_period": "1d", "token_ttl": "90", "token_max_ttl": 7200.9}, role=role(token_explicit_max_ttl=5400, token_period=86400, token_ttl=90, token_max_ttl=7200)),
    pv("a float equals an int, True equals 1", params={"secret_id_ttl": 60.0, "token_num_uses": 10.0, "secret_id_num_uses": True}, role=role()),
    pv("a key Vault does not answer is a mismatch", params={"token_period": 0}, role={k: v for k, v in VAULT_ROLE.items() if k != "token_period"}),
    pv("a string number is not a number", params={"token_num_uses": "10"}, role=role()),
    pv("overrides on", overrides={"token_num_uses": 5, "token_ttl": "1h", "bind_secret_id": False, "token_policies": ["x"], "secret_id_num_uses": None}, role=role(), allow_minion_override_params=True),
    pv("overrides off", overrides={"token_num_uses": 5}, role=role(), allow_minion_override_params=False),
    pv("overrides that are not a mapping", overrides="token_num_uses=5", role=role(), allow_minion_override_params=True),
    pv("Unicode digits and underscores", params={"secret_id_ttl": "\u0663m", "token_ttl": " 1_000 ", "token_max_ttl": "1e3", "token_period": True}),
    pv("an invalid time string", params={"token_ttl": "1w"}),
    pv("a time string with a trailing newline", params={"token_ttl": "5s\n"}),
    pv("a TTL that is a list", params={"token_ttl": [60]}),
    pv("an infinite TTL", params={"token_ttl": "inf"}),
    pv("a NaN TTL", params={"token_ttl": "nan"}),
    pv("params as a list", params=["token_ttl"]),
    pv("params as a string", params="token_ttl"),
    pv("an unknown issue type", type="approles"),
]


def param_vectors(sx):
    r = sx.runner
    out = []
    for case in PARAM_CASES:
        r.__opts__ = {"__role": "master", "vault": copy.deepcopy(case["master_config"])}
        r.__context__ = {}
        vec = dict(case)
        try:
            parsed = r._parse_issue_params(copy.deepcopy(case["overrides"]))  # pylint: disable=protected-access
        except Exception as err:  # pylint: disable=broad-except
            vec["raised"] = error_text(err)
            out.append(vec)
            continue
        vec["parsed"] = parsed
        if case["role"] is not None:
            vec["match"] = r._approle_params_match(case["role"], parsed)  # pylint: disable=protected-access
            # which parameters differ, one at a time, with saltext's own check
            vec["mismatches"] = [
                p
                for p in r.VALID_PARAMS["approle"]
                if p in parsed and not r._approle_params_match(case["role"], {p: parsed[p]})  # pylint: disable=protected-access
            ]
        out.append(vec)
    return out


JSON_VALUES = [
    {"plain": "ascii ~ text", "quote": '"', "backslash": "\\", "slash": "/", "html": "<a&b>"},
    ["\n\r\t\b\f", "\x00\x1f\x7f", "Zürich", "\u2028\u2029", "\U0001F600", "日本"],
    [0, -1, 9007199254740993, 0.1, 1.0, -0.0, 1e20, 1e-07, 123456789.125, 1e16, True, False, None],
    {"nested": {"list": [], "map": {}}, "1": "numeric key"},
]


def json_vectors():
    return [
        {"value": v, "ascii": json.dumps(v), "utf8": json.dumps(v, ensure_ascii=False)}
        for v in JSON_VALUES
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "src",
        nargs="?",
        default="/work/shared/reference/saltext-vault/src",
        help="the src directory of a saltext-vault checkout",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    sx = Saltext(os.path.abspath(args.src))
    cases = [run_case(sx, case) for case in all_cases()]
    params = param_vectors(sx)
    doc = {
        "generator": "hack/saltext/issue_trace.py",
        "saltext_version": SALTEXT_VERSION,
        "start_time": START,
        "vault_address": URL,
        "vault_policies": POLICIES,
        "cases": cases,
        "param_vectors": params,
        "json_vectors": json_vectors(),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
