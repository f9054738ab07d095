package params

import (
	"sort"
	"strings"
)

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

// GroupSuggestion is what Unknown offers for a name that no registered name
// is near but whose prefix names a framework or a component
// ("btl_shm_sizee"): that group's parameters closest to it.
type GroupSuggestion struct {
	// Framework and Component name the group ("btl", "shm"); Component is
	// "base" for a framework's own parameters and "all" when the prefix
	// names only the framework.
	Framework, Component string
	// Params are the group's parameters closest to the name, best first.
	Params []string
}

// suggestInGroup finds the longest prefix of name that a framework or a
// component's parameters share ("btl_shm_", "btl_base_", "btl_") and returns
// up to max of that group's parameters, ordered by closeness to the rest of
// name. Closeness counts, first, the words (between '_') of the rest that
// nearly match a word of the parameter ("sizee" and "size"), then the edit
// distance of the rests; so that btl_shm_sizee gets btl_shm_ring_size and
// btl_shm_max_send_size and not btl_shm_latency. When no parameter shares
// a word, the nearest by edit distance are offered.
func suggestInGroup(name string, ps []*Param, max int) (GroupSuggestion, bool) {
	type group struct {
		prefix, fw, comp string
	}
	var best group
	consider := func(g group) {
		if len(g.prefix) > len(best.prefix) && len(name) > len(g.prefix) && strings.HasPrefix(name, g.prefix) {
			best = g
		}
	}
	for _, p := range ps {
		fw, comp := p.def.Framework, p.def.Component
		if comp == "" {
			comp = "base"
		}
		consider(group{fw + "_" + comp + "_", fw, comp})
		consider(group{fw + "_", fw, "all"})
	}
	if best.prefix == "" {
		return GroupSuggestion{}, false
	}
	rest := name[len(best.prefix):]
	words := strings.Split(rest, "_")
	type cand struct {
		name    string
		matched int
		dist    int
	}
	var cands []cand
	for _, p := range ps {
		n := p.def.Name
		if !strings.HasPrefix(n, best.prefix) {
			continue
		}
		crest := n[len(best.prefix):]
		c := cand{name: n, dist: editDistance(rest, crest, len(rest)+len(crest))}
		cwords := strings.Split(crest, "_")
		for _, w := range words {
			for _, cw := range cwords {
				if editDistance(w, cw, wordLimit(cw)) <= wordLimit(cw) {
					c.matched++
					break
				}
			}
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return GroupSuggestion{}, false
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.matched != b.matched {
			return a.matched > b.matched
		}
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		return a.name < b.name
	})
	g := GroupSuggestion{Framework: best.fw, Component: best.comp}
	for i := 0; i < len(cands) && i < max; i++ {
		// Once some share a word with the name, the rest are noise.
		if cands[0].matched > 0 && cands[i].matched == 0 {
			break
		}
		g.Params = append(g.Params, cands[i].name)
	}
	return g, true
}

// wordLimit is how far a word may be from a parameter's word and still
// match it: one edit for words of up to 5 letters ("sizee", "lnk"), then one
// more per 4 letters; never so far that short words match anything.
func wordLimit(w string) int {
	if len(w) <= 5 {
		return 1
	}
	return 1 + (len(w)-2)/4
}
