// Package parameters computes a formula's "mapdata" the way Salt's
// template-formula map.jinja does (libmatchers.jinja + libmapstack.jinja):
// the map.jinja settings first (built-in sources, overridden by
// parameters/map_jinja.yaml and <tplroot>/parameters/map_jinja.yaml), then
// defaults.yaml and one layer per source of the `[TYPE[:OPTION[:DELIM]]@]KEY`
// notation, each merged with Salt's dictupdate.merge.
//
// Everything is pure: files arrive already decoded in Input.Files, and no
// Jinja is rendered. Where we differ from upstream, on purpose:
//
//   - A source's delimiter is honoured for every query method; upstream
//     drops it for grains.get and pillar.get (template-formula #266, as its
//     PR #267 fixes).
//   - `.yaml.jinja` files are not looked for, and a name ending in ".jinja"
//     names no file: we cannot render templates.
//   - A missing opts["__cli"] counts as salt-call, so `<tplroot>:strategy`
//     makes config.get merge as specified (upstream sees an "unknown"
//     command and skips the merge); see cliAllowsMerge.
//   - Merging a non-mapping into the stack is always an error; Salt's list
//     and aggregate strategies let some such merges through to fail later.
//   - config.get has no built-in DEFAULTS and resolves no sdb:// URIs.
//   - Mapdata is key-sorted throughout, map_jinja included, as `_mapdata`
//     dumps it; in memory upstream appends map_jinja last when new.
package parameters
