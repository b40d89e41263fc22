#!/usr/bin/env python3
"""Time the saltext-vault templating algorithm in CPython for the typical
binding of BenchmarkTypicalBinding (pkg/template/bench_test.go).

This is a re-implementation of the upstream algorithm as written down in the
project's templating spec (expand with string.Formatter, then str.format;
policies lowercased; metadata sorted, joined, with key__N entries), so the Go
figure can be compared with Python's in one run on one machine.
Prints: "python: <microseconds per binding> us".
"""
import string
import timeit


def expand(pattern, **mappings):
    out = []
    f = string.Formatter()
    for _, field, _, _ in f.parse(pattern):
        if field is None:
            continue
        value, _ = f.get_field(field, (), mappings)
        if isinstance(value, (list, dict)):
            token = "{" + field + "}"
            for elem in value:
                out += expand(pattern.replace(token, str(elem)), **mappings)
            return out
    return [pattern]


def policies(patterns, minion, grains, pillar):
    m = {"minion": minion, "grains": grains, "pillar": pillar}
    res = []
    for p in patterns:
        try:
            for e in expand(p, **m):
                res.append(e.format(**m).lower())
        except KeyError:
            pass
    return res


def metadata(patterns, minion, pillar):
    m = {"minion": minion, "pillar": pillar, "jid": "<no jid set>", "user": "<no user set>"}
    out = {}
    for key, p in patterns.items():
        vals, composite = [], False
        try:
            exp = expand(p, **m)
            composite = exp != [p]
            for e in exp:
                try:
                    vals.append(e.format(**m))
                except (KeyError, IndexError):
                    pass
        except (KeyError, IndexError):
            vals, composite = [], False
        vals.sort()
        out[key] = ",".join(vals)
        if composite and not any(k.startswith(key + "__") for k in patterns):
            for i, v in enumerate(vals):
                out[f"{key}__{i}"] = v
    return out


def paths(patterns, minion, pillar):
    m = {"minion": minion, "pillar": pillar}
    res = []
    for p in patterns:
        try:
            for e in expand(p, **m):
                res.append(e.format(**m))
        except KeyError:
            pass
    return res


POLICIES = ["saltstack/minions", "saltstack/{minion}", "salt_role_{pillar[roles]}", "salt_env_{grains[env]}_{pillar[roles]}"]
METADATA = {"minion-id": "{minion}", "roles": "{pillar[roles]}", "env": "{pillar[env]}"}
PATHS = ["salt/data/minions/{minion}", "salt/data/roles/{pillar[roles]}"]
MINION = "web01.example.com"
GRAINS = {"id": MINION, "env": "prod", "os_family": "Debian"}
PILLAR = {"roles": ["web", "db", "cache"], "env": "prod"}


def binding():
    return (policies(POLICIES, MINION, GRAINS, PILLAR), metadata(METADATA, MINION, PILLAR), paths(PATHS, MINION, PILLAR))


if __name__ == "__main__":
    p, md, pp = binding()
    assert p[-1] == "salt_env_prod_cache" and md["roles"] == "cache,db,web" and len(pp) == 4, (p, md, pp)
    n = 20000
    best = min(timeit.repeat(binding, number=n, repeat=5)) / n
    print(f"python: {best * 1e6:.1f} us")
