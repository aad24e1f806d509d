package fsstore

import (
	"maps"
	"slices"
)

// sortedKeys returns m's keys in order, so encodings are deterministic.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
