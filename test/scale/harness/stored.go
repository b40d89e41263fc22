//go:build integration

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// storedSize is what one binding weighs as the API server stores it after
// a phase: every write of a binding costs the API server in proportion
// (its patch applied to the object, the managed fields recomputed, the
// etcd watch event decoded), so a floor whose objects are lighter than
// the operator's is cheaper per write for that reason alone.
type storedSize struct {
	Bytes         int // the object's JSON, managedFields included
	ManagedFields int // metadata.managedFields' JSON
	Managers      int // its entries
	Annotations   int // metadata.annotations' JSON
	Status        int // status's JSON
}

// stored measures binding 0 of the actor's namespace (the floors' or the
// operator's), or says why it cannot.
func (h *harness) stored(ctx context.Context, actor string) (*storedSize, error) {
	ns := bindingNamespace
	if actor == "floor" {
		ns = floorNamespace
	}
	raw, err := h.w.apiserver.Get().AbsPath("/apis/minionvault.dev/v1alpha1/namespaces", ns, "minionbindings", minionID(0)).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return measureStored(raw)
}

func measureStored(raw []byte) (*storedSize, error) {
	var obj struct {
		Metadata struct {
			ManagedFields []json.RawMessage `json:"managedFields"`
			Annotations   json.RawMessage   `json:"annotations"`
		} `json:"metadata"`
		Status json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding a stored binding: %w", err)
	}
	s := &storedSize{Bytes: len(raw), Managers: len(obj.Metadata.ManagedFields),
		Annotations: len(obj.Metadata.Annotations), Status: len(obj.Status)}
	for _, m := range obj.Metadata.ManagedFields {
		s.ManagedFields += len(m)
	}
	return s, nil
}

// writeStored renders the stored bindings' sizes, by phase.
func writeStored(b *strings.Builder, all []*ShapeResult) {
	var rows strings.Builder
	for _, s := range all {
		for _, p := range s.Phases {
			if st := p.Stored; st != nil {
				fmt.Fprintf(&rows, "| %d | %s | %s | %d | %d | %d | %d | %d |\n", p.N, p.Shape, p.Phase,
					st.Bytes, st.ManagedFields, st.Managers, st.Annotations, st.Status)
			}
		}
	}
	if rows.Len() == 0 {
		return
	}
	b.WriteString("\n## One binding as the API server stores it after the phase (bytes of JSON)\n\n" +
		"Binding " + minionID(0) + " of the actor's namespace, read back after the phase. The API server's work per write of a binding " +
		"grows with it (the patch applied to the object, the managed fields recomputed, the etcd watch event decoded).\n\n" +
		"| N | shape | phase | whole | managedFields | managers | annotations | status |\n|---:|---|---|---:|---:|---:|---:|---:|\n")
	b.WriteString(rows.String())
}
