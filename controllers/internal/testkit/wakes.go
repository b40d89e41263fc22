package testkit

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Wake is one row of a watch test: what a map function returned for an
// event, and the objects (namespace/name, or name) it must wake.
type Wake struct {
	Name string
	Got  []reconcile.Request
	Want []string
}

// WatchClient is a fake client holding WatchFixtures that fails the test
// when a map function lists without a field index.
func WatchClient(t *testing.T) client.Client {
	return Builder().WithObjects(WatchFixtures()...).WithInterceptorFuncs(ListsOnlyByIndex(t)).Build()
}

// CheckWakes checks each row: exactly its objects, each once.
func CheckWakes(t *testing.T, rows []Wake) {
	for _, tc := range rows {
		t.Run(tc.Name, func(t *testing.T) {
			var got []string
			for _, r := range tc.Got {
				got = append(got, strings.TrimPrefix(r.Namespace+"/"+r.Name, "/"))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.Want) {
				t.Errorf("woke %q, want %q", got, tc.Want)
			}
		})
	}
}
