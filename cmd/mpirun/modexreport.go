package main

// The modex report (--report-modex): what the ranks' modex put on the PMI
// wire, per fence.

import (
	"fmt"
	"sort"

	"github.com/gompi/gompi/rte"
)

// reportModex prints, per fence, how many processes, keys and values the
// modex published and the bytes it put on the PMI wire for them.
func (j *job) reportModex() {
	j.modexMu.Lock()
	defer j.modexMu.Unlock()
	// Group the chunks by fence: "m<fence>.<node>.<chunk>".
	fences := map[int]map[string]string{}
	bytes := map[int]int64{}
	for k, v := range j.modexPuts {
		var seq, node, chunk int
		if _, err := fmt.Sscanf(k, "m%d.%d.%d", &seq, &node, &chunk); err != nil {
			continue
		}
		if fences[seq] == nil {
			fences[seq] = map[string]string{}
		}
		fences[seq][k] = v
		bytes[seq] += j.modexLineBytes[k]
	}
	if len(fences) == 0 {
		j.logf("modex: nothing was published")
		return
	}
	seqs := make([]int, 0, len(fences))
	for seq := range fences {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	for _, seq := range seqs {
		st, err := rte.StatsOfBlobs(fences[seq])
		if err != nil {
			j.logf("modex report: %v", err)
			return
		}
		st.WireBytes = bytes[seq]
		j.logf("modex fence %d: %d processes, %d values of %d keys, %d value bytes; %d bytes in %d puts on the PMI wire; naming overhead %.2f bytes per key and process",
			seq, st.Processes, st.Entries, st.Keys, st.ValueBytes, st.WireBytes, st.Puts, st.NamingOverhead())
	}
}
