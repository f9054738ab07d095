package rte

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

// ProcessMappingKey is the PMI key under which launchers publish which node
// each rank runs on.
const ProcessMappingKey = "PMI_process_mapping"

// FormatMapping writes a node index per rank in MPICH's PMI_process_mapping
// form, "(vector,(first node,nodes,ranks per node),…)", one block per run of
// consecutive ranks on consecutive nodes with equal counts.
func FormatMapping(nodeOf []int) string {
	type block struct{ first, nodes, ppn int }
	var blocks []block
	for i := 0; i < len(nodeOf); {
		node, n := nodeOf[i], 1
		for i+n < len(nodeOf) && nodeOf[i+n] == node {
			n++
		}
		i += n
		if k := len(blocks) - 1; k >= 0 && blocks[k].ppn == n && blocks[k].first+blocks[k].nodes == node {
			blocks[k].nodes++
			continue
		}
		blocks = append(blocks, block{node, 1, n})
	}
	parts := make([]string, len(blocks))
	for i, b := range blocks {
		parts[i] = fmt.Sprintf("(%d,%d,%d)", b.first, b.nodes, b.ppn)
	}
	return "(vector," + strings.Join(parts, ",") + ")"
}

// ParseMapping expands a PMI_process_mapping value into a node index per
// rank for a job of size ranks. A mapping shorter than the job repeats, as
// MPICH reads it. Errors carry mpierr.ErrIntern.
func ParseMapping(s string, size int) ([]int, error) {
	bad := func(why string) ([]int, error) {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "%s %q: %s", ProcessMappingKey, abbreviate(s), why)
	}
	if size < 1 {
		return bad("job size must be at least 1")
	}
	body, ok := strings.CutPrefix(strings.TrimSpace(s), "(vector,")
	if !ok || !strings.HasSuffix(body, ")") {
		return bad("not of the form (vector,…)")
	}
	body = strings.TrimSuffix(body, ")")
	var pattern []int
	for body != "" {
		if body[0] != '(' {
			return bad("expected a (node,nodes,ranks) block")
		}
		end := strings.IndexByte(body, ')')
		if end < 0 {
			return bad("unclosed block")
		}
		fields := strings.Split(body[1:end], ",")
		if len(fields) != 3 {
			return bad("a block has three numbers")
		}
		var n [3]int
		for i, f := range fields {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 0 || v > 1<<20 {
				return bad("block numbers are small non-negative integers")
			}
			n[i] = v
		}
		if n[1] == 0 || n[2] == 0 {
			return bad("a block has at least one node and one rank per node")
		}
		for node := n[0]; node < n[0]+n[1]; node++ {
			for k := 0; k < n[2]; k++ {
				if len(pattern) >= size {
					break
				}
				pattern = append(pattern, node)
			}
		}
		body = strings.TrimPrefix(body[end+1:], ",")
	}
	if len(pattern) == 0 {
		return bad("no blocks")
	}
	out := make([]int, size)
	for r := range out {
		out[r] = pattern[r%len(pattern)]
	}
	return out, nil
}

func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
