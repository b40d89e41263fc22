package vaulttest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/vault"
)

func TestFakeZeroValue(t *testing.T) {
	var f Fake
	acc, err := f.MountAccessor(context.Background(), "salt-minions")
	if err != nil || acc == "" {
		t.Fatalf("accessor %q %v", acc, err)
	}
	if err := f.WriteRole(context.Background(), "other", "x", nil); err == nil {
		t.Error("a role on a mount that is not enabled")
	}
	if acc2 := f.EnableAuth("other"); acc2 == "" || acc2 == acc {
		t.Errorf("EnableAuth %q", acc2)
	}
	if err := f.WriteRole(context.Background(), "other", "x", nil); err != nil {
		t.Error(err)
	}
}

func TestFakeCountersAndFailures(t *testing.T) {
	f := NewFake()
	ctx := context.Background()
	boom := &vault.Error{Op: "write auth/salt-minions/role/web01", StatusCode: 503, Messages: []string{"Vault is sealed"}}

	f.FailNext("WriteRole", boom)
	if err := f.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_ttl": 60}); err != boom {
		t.Fatalf("err = %v, want the injected one", err)
	}
	if r, _ := f.ReadRole(ctx, "salt-minions", "web01"); r != nil {
		t.Error("a failed write changed the fake")
	}
	if err := f.WriteRole(ctx, "salt-minions", "web01", map[string]any{"token_ttl": "1m"}); err != nil {
		t.Fatal(err)
	}
	r, _ := f.ReadRole(ctx, "salt-minions", "web01")
	if r["token_ttl"] != json.Number("60") {
		t.Errorf("token_ttl %v", r["token_ttl"])
	}

	f.FailNext("write", errors.New("any write"))
	f.FailNext("*", errors.New("any call"))
	if _, err := f.ServerInfo(ctx); err == nil || err.Error() != "any call" {
		t.Errorf("ServerInfo: %v", err)
	}
	if err := f.WritePolicy(ctx, "p", `path "x" { capabilities = ["read"] }`); err == nil || err.Error() != "any write" {
		t.Errorf("WritePolicy: %v", err)
	}
	if err := f.WritePolicy(ctx, "p", `path "x" { capabilities = ["read"] }`); err != nil {
		t.Errorf("second WritePolicy: %v", err)
	}

	if f.Calls("WriteRole") != 2 || f.Calls("WritePolicy") != 2 || f.Calls("ReadRole") != 2 || f.Calls("ServerInfo") != 1 {
		t.Errorf("calls: WriteRole %d WritePolicy %d ReadRole %d ServerInfo %d", f.Calls("WriteRole"), f.Calls("WritePolicy"), f.Calls("ReadRole"), f.Calls("ServerInfo"))
	}
	if f.Writes() != 4 || f.Calls(vault.OpWrite) != 4 || f.Calls(vault.OpRead) != 3 || f.Calls("*") != 7 {
		t.Errorf("Writes %d write %d read %d all %d", f.Writes(), f.Calls(vault.OpWrite), f.Calls(vault.OpRead), f.Calls("*"))
	}
	if err := f.DeletePolicy(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if f.Writes() != 5 || f.Calls(vault.OpDelete) != 1 {
		t.Errorf("a delete counts as a write: %d", f.Writes())
	}
	f.ResetCalls()
	if f.Writes() != 0 || f.Calls("*") != 0 {
		t.Error("ResetCalls")
	}
}

func TestFakeMetadataLimits(t *testing.T) {
	f := NewFake()
	md := map[string]string{}
	for i := 0; i < 65; i++ {
		md["k"+strconv.Itoa(i)] = "v"
	}
	_, err := f.WriteEntityByName(context.Background(), "e", md)
	var ve *vault.Error
	if !errors.As(err, &ve) || ve.StatusCode != 500 {
		t.Errorf("65 pairs: %v", err)
	}
	long := make([]byte, 513)
	for i := range long {
		long[i] = 'x'
	}
	_, err = f.WriteEntityByName(context.Background(), "e", map[string]string{"k": string(long)})
	if !errors.As(err, &ve) || ve.StatusCode != 500 {
		t.Errorf("513-byte value: %v", err)
	}
}

func TestFakeReturnsCopies(t *testing.T) {
	f := NewFake()
	ctx := context.Background()
	md := map[string]string{"a": "1"}
	_, _ = f.WriteEntityByName(ctx, "e", md)
	md["a"] = "changed"
	e, _ := f.ReadEntityByName(ctx, "e")
	e.Metadata["b"] = "2"
	got, _ := f.ReadEntityByName(ctx, "e")
	if len(got.Metadata) != 1 || got.Metadata["a"] != "1" {
		t.Errorf("stored metadata changed through a caller's map: %v", got.Metadata)
	}
	_ = f.WriteRole(ctx, "salt-minions", "r", map[string]any{"token_policies": []string{"a"}})
	r, _ := f.ReadRole(ctx, "salt-minions", "r")
	r["token_policies"].([]any)[0] = "changed"
	r2, _ := f.ReadRole(ctx, "salt-minions", "r")
	if r2["token_policies"].([]any)[0] != "a" {
		t.Error("stored role changed through a read result")
	}
}
