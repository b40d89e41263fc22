// Package watch is what wakes a reconcile: the field indexes the three
// controllers list through, the functions that map a changed object to the
// requests it wakes (indexes.go), and the predicates that filter events
// (predicates.go).
package watch
