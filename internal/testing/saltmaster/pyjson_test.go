package saltmaster

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/minionvault/minion-vault-operator/pkg/value"
)

// The vectors are saltext's json.dumps (as `requests` calls it) run on edge
// inputs by hack/saltext/issue_trace.py.

type jsonVector struct {
	Value json.RawMessage `json:"value"`
	ASCII string          `json:"ascii"`
	UTF8  string          `json:"utf8"`
}

func loadJSONVectors(t *testing.T) []jsonVector {
	t.Helper()
	var doc struct {
		JSONVectors []jsonVector `json:"json_vectors"`
	}
	if err := json.Unmarshal(loadTraceBytes(t), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.JSONVectors) == 0 {
		t.Fatal("the trace has no vectors: regenerate it")
	}
	return doc.JSONVectors
}

func TestPyJSON(t *testing.T) {
	vectors := loadJSONVectors(t)
	for _, v := range vectors {
		val := decodeValue(t, v.Value)
		for _, c := range []struct {
			ascii bool
			want  string
		}{{true, v.ASCII}, {false, v.UTF8}} {
			got, err := pyJSON(val, c.ascii, true)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("json.dumps(ensure_ascii=%v):\n got %s\nwant %s", c.ascii, got, c.want)
			}
		}
	}
	if _, err := pyJSON(value.NewFloat(math.NaN()), true, false); err == nil {
		t.Error("NaN in a request body: want requests' InvalidJSONError")
	}
}
