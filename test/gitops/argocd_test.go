package gitops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// This file runs health scripts the way Argo CD v3 does, read from its
// source (util/lua/lua.go, util/settings/settings.go and
// gitops-engine/pkg/health/health.go) and reproduced here, so that the
// scripts in config/argocd are tested as Argo CD will run them:
//
//   - argocd-cm keys resource.customizations.health.<group>_<kind> and
//     resource.customizations.useOpenLibs.<group>_<kind> (split on "." into
//     four parts, "_" to "/");
//   - a gopher-lua state without the standard libraries unless useOpenLibs,
//     then the package, base and table libraries opened (Argo CD also opens
//     a "safe" os library of its own, not reproduced: the scripts do not use
//     os, and a script that did would fail here rather than pass);
//   - a context with a 1 s timeout;
//   - the object as the global obj, converted value by value as decodeValue
//     does, and the global actionParams (an empty table for health);
//   - the last value on the stack: a table is JSON-encoded and read as
//     {status, message}; a status outside Argo CD's six is Unknown with
//     "Lua returned an invalid health status"; nil is an empty status; any
//     other type an error;
//   - before any script, an object with a deletionTimestamp (and no hook
//     finalizer) is Progressing "Pending deletion".

// argoHealth is Argo CD's health.HealthStatus.
type argoHealth struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

func (h argoHealth) String() string {
	if h.Message == "" {
		return h.Status
	}
	return h.Status + ": " + h.Message
}

// argoStatuses are the health codes Argo CD accepts from a script.
var argoStatuses = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

// argoOverride is the part of Argo CD's ResourceOverride that health uses.
type argoOverride struct {
	HealthLua   string
	UseOpenLibs bool
}

// argoCMPath is the ConfigMap users merge into argocd-cm.
var argoCMPath = filepath.Join("..", "..", "config", "argocd", "argocd-cm.yaml")

// loadArgoCM reads the health overrides from an argocd-cm manifest, keyed
// by "group/Kind" as Argo CD keys them.
func loadArgoCM(path string) (map[string]argoOverride, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(raw, cm); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cm.Name != "argocd-cm" {
		return nil, fmt.Errorf("%s: ConfigMap %q, Argo CD reads argocd-cm", path, cm.Name)
	}
	out := map[string]argoOverride{}
	for k, v := range cm.Data {
		parts := strings.SplitN(k, ".", 4)
		if len(parts) < 4 || parts[0]+"."+parts[1] != "resource.customizations" {
			return nil, fmt.Errorf("%s: key %q is not resource.customizations.<type>.<group_kind>", path, k)
		}
		gk := strings.Split(parts[3], "_")
		if len(gk) != 2 {
			return nil, fmt.Errorf("%s: key %q: want <group>_<kind>", path, k)
		}
		key := gk[0] + "/" + gk[1]
		o := out[key]
		switch parts[2] {
		case "health":
			o.HealthLua = v
		case "useOpenLibs":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, k, err)
			}
			o.UseOpenLibs = b
		default:
			return nil, fmt.Errorf("%s: customization type %q", path, parts[2])
		}
		out[key] = o
	}
	return out, nil
}

// argoResourceHealth is what Argo CD shows for obj: its deletion rule, then
// the object's health script.
func argoResourceHealth(obj *unstructured.Unstructured, overrides map[string]argoOverride) (argoHealth, error) {
	if obj.GetDeletionTimestamp() != nil && !hasString(obj.GetFinalizers(), "argocd.argoproj.io/hook-finalizer") {
		return argoHealth{Status: "Progressing", Message: "Pending deletion"}, nil
	}
	gvk := obj.GroupVersionKind()
	o, ok := overrides[gvk.Group+"/"+gvk.Kind]
	if !ok || o.HealthLua == "" {
		return argoHealth{}, fmt.Errorf("no health script for %s/%s", gvk.Group, gvk.Kind)
	}
	return runArgoHealthLua(obj, o.HealthLua, o.UseOpenLibs)
}

// runArgoHealthLua runs one health script on obj.
func runArgoHealthLua(obj *unstructured.Unstructured, script string, useOpenLibs bool) (argoHealth, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !useOpenLibs})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return argoHealth{}, fmt.Errorf("opening %s: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", toLua(l, obj.Object))

	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}
	// Argo CD drops the stack trace of run-time errors: users see these.
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
		apiErr.StackTrace = ""
	}
	if err != nil {
		return argoHealth{}, fmt.Errorf("health script: %w", err)
	}
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return argoHealth{}, nil
	case lua.LTTable:
	default:
		return argoHealth{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	raw, err := json.Marshal(fromLua(ret))
	if err != nil {
		return argoHealth{}, err
	}
	var h argoHealth
	if err := json.Unmarshal(raw, &h); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Value == "array" {
			return argoHealth{}, nil // an empty table encodes as []
		}
		return argoHealth{}, err
	}
	if !argoStatuses[h.Status] {
		return argoHealth{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return h, nil
}

// toLua converts a value of an unstructured object as Argo CD's decodeValue
// does: numbers of every Go type to Lua numbers, json.Number to a string,
// slices to sequences, maps to tables, anything else to nil.
func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case json.Number:
		return lua.LString(x)
	case []any:
		t := l.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetH(lua.LString(k), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// fromLua converts a script's result for JSON as gopher-json encodes it: a
// table with keys 1..n (or none) is an array, any other an object.
func fromLua(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LBool:
		return bool(x)
	case lua.LNumber:
		return float64(x)
	case lua.LString:
		return string(x)
	case *lua.LTable:
		if n := x.MaxN(); n > 0 || isEmpty(x) {
			arr := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				arr = append(arr, fromLua(x.RawGetInt(i)))
			}
			return arr
		}
		obj := map[string]any{}
		x.ForEach(func(k, val lua.LValue) { obj[k.String()] = fromLua(val) })
		return obj
	}
	return nil
}

func isEmpty(t *lua.LTable) bool {
	k, _ := t.Next(lua.LNil)
	return k == lua.LNil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
