package faultproxy

import (
	"slices"
	"time"
)

// Requests returns every request received so far, in order of arrival.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Between returns the requests that arrived in [from, to).
func (p *Proxy) Between(from, to time.Time) []Request {
	var out []Request
	for _, r := range p.Requests() {
		if !r.At.Before(from) && r.At.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// Rate is the requests per second that arrived in [from, to).
func (p *Proxy) Rate(from, to time.Time) float64 {
	d := to.Sub(from).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(len(p.Between(from, to))) / d
}

// Count is how many requests arrived in one second under one mode.
type Count struct {
	Mode     Mode
	Second   time.Time // truncated to the second
	Requests int
	// Outcomes counts the requests of that second by outcome.
	Outcomes map[Outcome]int
}

// Counts are the requests per mode and second, in time order.
func (p *Proxy) Counts() []Count {
	type key struct {
		mode Mode
		sec  int64
	}
	at := map[key]int{}
	var out []Count
	for _, r := range p.Requests() {
		k := key{r.Mode, r.At.Unix()}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Count{Mode: r.Mode, Second: time.Unix(k.sec, 0), Outcomes: map[Outcome]int{}})
		}
		out[i].Requests++
		out[i].Outcomes[r.Outcome]++
	}
	slices.SortStableFunc(out, func(a, b Count) int { return a.Second.Compare(b.Second) })
	return out
}

// Outcomes counts requests by outcome.
func Outcomes(reqs []Request) map[Outcome]int {
	out := map[Outcome]int{}
	for _, r := range reqs {
		out[r.Outcome]++
	}
	return out
}

func (o Outcome) String() string {
	switch o {
	case Pending:
		return "pending"
	case Forwarded:
		return "forwarded"
	case Refused:
		return "refused"
	case Truncated:
		return "truncated"
	case DroppedBefore:
		return "dropped-before"
	case DroppedAfter:
		return "dropped-after"
	case Abandoned:
		return "abandoned"
	case Failed:
		return "failed"
	}
	return "outcome"
}
