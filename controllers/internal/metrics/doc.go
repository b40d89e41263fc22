// Package metrics holds the operator's Prometheus metrics, registered once
// per process and shared by every manager in it.
package metrics
