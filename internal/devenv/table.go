package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// GetTable asks the API server for a list as a Table, the way kubectl get
// does: the server renders the CRD's printer columns (its
// additionalPrinterColumns). path is the list's URL path, such as
// /apis/minionvault.dev/v1alpha1/minionbindings.
func GetTable(ctx context.Context, cfg *rest.Config, path string) (*metav1.Table, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+path+"?includeObject=Metadata", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	t := &metav1.Table{}
	if err := json.Unmarshal(body, t); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return t, nil
}

// WriteTable prints a Table as kubectl get does: upper-case headers, columns
// padded by three spaces, and with withNamespace a NAMESPACE column first
// (kubectl get -A), taken from each row's object metadata. It prints the
// columns of priority 0 and those named in extra (kubectl's -o wide shows
// every column of a higher priority).
func WriteTable(w io.Writer, t *metav1.Table, withNamespace bool, extra ...string) error {
	var idx []int
	var header []string
	if withNamespace {
		header = append(header, "NAMESPACE")
	}
	for i, c := range t.ColumnDefinitions {
		if c.Priority == 0 || slices.Contains(extra, c.Name) {
			idx = append(idx, i)
			header = append(header, strings.ToUpper(c.Name))
		}
	}
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0) // kubectl's settings
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range t.Rows {
		var cells []string
		if withNamespace {
			cells = append(cells, rowNamespace(r))
		}
		for _, i := range idx {
			var cell any
			if i < len(r.Cells) {
				cell = r.Cells[i]
			}
			cells = append(cells, formatCell(cell))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func rowNamespace(r metav1.TableRow) string {
	var m struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if len(r.Object.Raw) > 0 && json.Unmarshal(r.Object.Raw, &m) == nil {
		return m.Metadata.Namespace
	}
	return ""
}

// formatCell prints a cell as kubectl does: nil as <none>, strings as they
// are, anything else with %v.
func formatCell(v any) string {
	switch v := v.(type) {
	case nil:
		return "<none>"
	case string:
		return v
	case float64:
		if v == float64(int64(v)) {
			return fmt.Sprint(int64(v))
		}
	}
	return fmt.Sprint(v)
}
