#!/usr/bin/env python3
"""Where a cold go build spends its compile time, and what it could drop.

Reads the trace of `go build -debug-trace=TRACE` and the import graph of
`go list -deps -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ROOTS`
(same module folder, same build tags), and prints:

  - the compile and link seconds summed over actions, and how long zero,
    one, or two or more actions ran at once (idle cores show up there);
  - the slowest actions;
  - the subtrees of the import graph that one package alone brings in (its
    dominator subtree, from the roots), weighted by compile seconds: what
    leaving that package out would save.

With an empty GOCACHE every package compiles, so an action's seconds are its
compile's; run on a quiet machine, where they are close to CPU seconds.
docs/development.md shows it used on kube-apiserver and Vault.

usage: build_profile.py TRACE DEPS ROOT [ROOT...] [--top N]
"""
import argparse
import collections
import json
import sys

ACTION = "Executing action ("


def actions(trace_path):
    """(name, start, end) in seconds of each build or link action."""
    with open(trace_path) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    spans = [e for e in events if e.get("ph") in ("B", "E")]
    if not spans:
        sys.exit(f"{trace_path}: no trace events (made by go build -debug-trace?)")
    t0 = min(e["ts"] for e in spans)
    open_spans = collections.defaultdict(list)
    out = []
    for e in sorted(spans, key=lambda e: e["ts"]):
        key = (e.get("pid"), e.get("tid"))
        if e["ph"] == "B":
            open_spans[key].append(e)
            continue
        if not open_spans[key]:
            continue
        b = open_spans[key].pop()
        name = b.get("name", "")
        if not name.startswith(ACTION) or name.startswith(ACTION + "build check cache"):
            continue
        what = name[len(ACTION):-1]
        if what.startswith("build ") or what.startswith("link "):
            out.append((what, (b["ts"] - t0) / 1e6, (e["ts"] - t0) / 1e6))
    return out


def concurrency(spans):
    """Seconds spent with 0, 1 and 2+ actions running, first start to last end."""
    edges = sorted([(b, 1) for _, b, _ in spans] + [(e, -1) for _, _, e in spans])
    running, last, spent = 0, edges[0][0], collections.Counter()
    for t, d in edges:
        spent[min(running, 2)] += t - last
        running += d
        last = t
    return spent


def read_graph(deps_path):
    graph = {}
    with open(deps_path) as f:
        for line in f:
            fields = line.split()
            if fields:
                graph[fields[0]] = fields[1:]
    return {p: [q for q in imports if q in graph] for p, imports in graph.items()}


def dominators(graph, roots):
    """Immediate dominators from a virtual root above ROOTS (Cooper, Harvey, Kennedy)."""
    top = "<roots>"
    graph = dict(graph)
    graph[top] = list(roots)
    order, seen = [], {top}
    stack = [(top, iter(graph[top]))]
    while stack:
        node, it = stack[-1]
        for nxt in it:
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(graph[nxt])))
                break
        else:
            stack.pop()
            order.append(node)
    rpo = order[::-1]
    index = {n: i for i, n in enumerate(rpo)}
    preds = collections.defaultdict(list)
    for n in rpo:
        for m in graph[n]:
            preds[m].append(n)
    idom = {top: top}

    def meet(a, b):
        while a != b:
            while index[a] > index[b]:
                a = idom[a]
            while index[b] > index[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for n in rpo[1:]:
            done = [p for p in preds[n] if p in idom]
            new = done[0]
            for p in done[1:]:
                new = meet(p, new)
            if idom.get(n) != new:
                idom[n] = new
                changed = True
    return top, idom, order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("deps")
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

    spans = actions(args.trace)
    if not spans:
        sys.exit(f"{args.trace}: no build or link actions")
    seconds = collections.Counter()
    for what, b, e in spans:
        seconds[what.split(" ", 1)[1]] += e - b
    spent = concurrency(spans)
    print(f"actions: {len(spans)}, {sum(seconds.values()):.1f} s summed; "
          f"wall with 0 / 1 / 2+ running: {spent[0]:.1f} / {spent[1]:.1f} / {spent[2]:.1f} s")
    print(f"\nslowest {args.top} actions (s, start-end, action):")
    for what, b, e in sorted(spans, key=lambda s: s[1] - s[2])[: args.top]:
        print(f"{e - b:7.1f}  {b:6.1f}-{e:6.1f}  {what}")

    graph = read_graph(args.deps)
    missing = [r for r in args.roots if r not in graph]
    if missing:
        sys.exit(f"{args.deps}: no package {', '.join(missing)}")
    top, idom, postorder = dominators(graph, args.roots)
    weight, count = collections.Counter(), collections.Counter()
    for n in postorder:  # children before their dominators
        weight[n] += seconds.get(n, 0.0)
        count[n] += 1
        if n != top:
            weight[idom[n]] += weight[n]
            count[idom[n]] += count[n]
    print(f"\nwhat one package alone brings in, from {', '.join(args.roots)} "
          f"({weight[top]:.1f} s in {count[top] - 1} packages):")
    print("      s  pkgs  package  (the package that alone imports it)")
    shown = 0
    for n, w in weight.most_common():
        if n == top or n in args.roots:
            continue
        print(f"{w:7.1f} {count[n]:5d}  {n}  ({idom[n] if idom[n] != top else '-'})")
        shown += 1
        if shown == args.top:
            break


if __name__ == "__main__":
    main()
