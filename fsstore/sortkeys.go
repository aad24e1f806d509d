package fsstore

import (
	"slices"
)

// sortedKeys returns m's keys in order, so encodings are deterministic.
// An empty map, which every commit and Head asks about (metadata), costs
// no allocation (slices.Sorted(maps.Keys(m)) cost two even then).
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
