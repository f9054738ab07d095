package params

import "sort"

// Suggest returns up to max names from known that are closest to name (ties
// by name). Close means an edit distance, counting a swap of two neighbouring
// letters as one edit, of at most max(2, len(name)/5): enough for
// "btl_base_verbsoe" and "btl_tcp_if_inclde", not so much that everything
// looks alike. Only the names at the smallest distance found are returned, so
// that btl_base_verbose is suggested for btl_base_verbsoe without
// pml_base_verbose.
func Suggest(name string, known []string, max int) []string {
	limit := len(name) / 5
	if limit < 2 {
		limit = 2
	}
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	for _, k := range known {
		if d := editDistance(name, k, limit); d <= limit {
			cands = append(cands, cand{k, d})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].dist != cands[j].dist {
			return cands[i].dist < cands[j].dist
		}
		return cands[i].name < cands[j].name
	})
	var out []string
	for i := 0; i < len(cands) && i < max && cands[i].dist == cands[0].dist; i++ {
		out = append(out, cands[i].name)
	}
	return out
}

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and adjacent transpositions). It
// gives up early, returning limit+1, once the distance must exceed limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
