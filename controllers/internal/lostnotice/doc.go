// Package lostnotice is the hand-over between the binding controller and
// the lost-minion collector: a binding that finds its minion's objects
// held by a binding that is gone notices a candidate; the collector judges
// it and wakes the claimants once it is collected. Both lock an entity
// through it while deciding.
package lostnotice
