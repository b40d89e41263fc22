//go:build integration

package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// samples are Prometheus samples: the series as written
// (`name{k="v",...}`, labels sorted as the client library writes them) to
// its value.
type samples map[string]float64

// parseMetrics reads the Prometheus text format: enough for counters and
// gauges (no escaped quotes or commas inside label values, which the
// series the harness reads do not have).
func parseMetrics(r io.Reader) (samples, error) {
	out := samples{}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: %q: %w", line, err)
		}
		out[line[:i]] += v
	}
	return out, s.Err()
}

// sum adds the series of metric name whose labels include every one of
// labels (`k="v"` each).
func (s samples) sum(name string, labels ...string) float64 {
	var total float64
	for series, v := range s {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ls := strings.Split(strings.TrimSuffix(rest, "}"), ",")
		all := true
		for _, want := range labels {
			found := false
			for _, l := range ls {
				if l == want {
					found = true
					break
				}
			}
			if !found {
				all = false
				break
			}
		}
		if all {
			total += v
		}
	}
	return total
}

// label returns the value of label k of a series, "" if none.
func label(series, k string) string {
	_, rest, ok := strings.Cut(series, "{")
	if !ok {
		return ""
	}
	for _, l := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
		if name, v, ok := strings.Cut(l, "="); ok && name == k {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// add returns s + o, series by series.
func (s samples) add(o samples) samples {
	out := maps.Clone(s)
	if out == nil {
		out = samples{}
	}
	for k, v := range o {
		out[k] += v
	}
	return out
}

// scrapeClient gives up on an operator that does not answer.
var scrapeClient = &http.Client{Timeout: 10 * time.Second}

func scrape(ctx context.Context, url string) (samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}
