//go:build integration

package harness

import (
	"testing"
)

func TestMeasureStored(t *testing.T) {
	raw := []byte(`{"metadata":{"name":"m00000","annotations":{"a":"b"},"managedFields":[{"manager":"x"},{"manager":"yy"}]},"status":{"connection":"v"}}`)
	got, err := measureStored(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := storedSize{Bytes: len(raw), ManagedFields: len(`{"manager":"x"}`) + len(`{"manager":"yy"}`), Managers: 2,
		Annotations: len(`{"a":"b"}`), Status: len(`{"connection":"v"}`)}
	if *got != want {
		t.Errorf("%+v, want %+v", *got, want)
	}
	if _, err := measureStored([]byte(`[]`)); err == nil {
		t.Error("a list measured as a binding")
	}
}
