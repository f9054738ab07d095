package main

import (
	"fmt"
	"sort"
)

// Figure is one plot to draw: what the renderer needs and nothing of the
// CSV, so that grouping and drawing are tested apart.
type Figure struct {
	Name   string // file name without .svg
	Title  string
	XLabel string
	YLabel string
	LogY   bool // latencies and bandwidths span decades; overlap (%) does not
	Series []Series
}

// Series is one line: a configuration's medians, sorted by X.
type Series struct {
	Label  string
	Points []Point
}

// Point is one median; Runs is how many runs it is the median of.
type Point struct {
	X, Y float64
	Runs int
}

// labels name the configurations as compare.sh's header and the summaries
// do; order puts them in that order in legends (others follow by name).
var labels = map[string]string{
	"ompi-vader":      "Open MPI vader",
	"ompi-tcp":        "Open MPI tcp",
	"gompi-shm":       "gompi shm + LLP",
	"gompi-shm-nollp": "gompi shm, no LLP",
	"gompi-tcp":       "gompi tcp",
	"gompi-tcp-llp":   "gompi tcp + LLP",
	"ompi":            "Open MPI (vader)",
	"mpich":           "MPICH",
	"gompi":           "gompi (shm)",
}

var order = []string{"ompi-vader", "ompi-tcp", "gompi-shm", "gompi-shm-nollp", "gompi-tcp", "gompi-tcp-llp", "ompi", "mpich", "gompi"}

func label(config string) string {
	if l, ok := labels[config]; ok {
		return l
	}
	return config
}

func rank(config string) int {
	for i, c := range order {
		if c == config {
			return i
		}
	}
	return len(order)
}

var placementText = map[string]string{
	"near":  "placement near (probes < 120 ns)",
	"far":   "placement far (probes > 150 ns)",
	"mixed": "placement mixed",
	"all":   "all placements",
}

func placement(p string) string {
	if t, ok := placementText[p]; ok {
		return t
	}
	return "placement " + p
}

var metricText = map[string]string{
	"latency":   "one-way latency",
	"bandwidth": "windowed bandwidth",
	"time":      "time per call",
	"pure":      "pure latency (Ixxx + Wait)",
	"overlap":   "overlap with compute",
	"overlap_t": "overlap with compute, Tests between slices",
}

func unitText(u string) string {
	switch u {
	case "us":
		return "µs"
	case "MB/s":
		return "MB/s (10^6 B/s)"
	}
	return u
}

// key groups rows into figures; xRanks is set for an operation that has no
// size (barrier, ibarrier), plotted against the number of ranks instead.
type key struct {
	mode, placement, op, metric, unit string
	ranks                             int // 0 when xRanks
	xRanks                            bool
}

// Figures groups rows into plots: per mode, placement, operation, metric
// and (for sized operations) rank count, one series per configuration.
// Sizes of 0 bytes cannot sit on a log axis and are left out of sized plots.
func Figures(rows []Row) []Figure {
	sized := map[[3]string]bool{} // mode, op, metric with some size > 0
	for _, r := range rows {
		if r.Size > 0 {
			sized[[3]string{r.Mode, r.Op, r.Metric}] = true
		}
	}
	groups := map[key]map[string][]Point{}
	for _, r := range rows {
		k := key{mode: r.Mode, placement: r.Placement, op: r.Op, metric: r.Metric, unit: r.Unit, ranks: r.Ranks}
		x := float64(r.Size)
		if !sized[[3]string{r.Mode, r.Op, r.Metric}] {
			k.ranks, k.xRanks, x = 0, true, float64(r.Ranks)
		} else if r.Size == 0 {
			continue
		}
		logY := r.Metric != "overlap" && r.Metric != "overlap_t"
		if logY && r.Value <= 0 {
			continue // a log axis has no place for it
		}
		if groups[k] == nil {
			groups[k] = map[string][]Point{}
		}
		groups[k][r.Config] = append(groups[k][r.Config], Point{X: x, Y: r.Value, Runs: r.Runs})
	}
	var figs []Figure
	for k, bycfg := range groups {
		f := Figure{LogY: k.metric != "overlap" && k.metric != "overlap_t"}
		f.Name, f.Title, f.XLabel = name(k), title(k), "message size (bytes)"
		if k.xRanks {
			f.XLabel = "ranks"
		}
		f.YLabel = fmt.Sprintf("%s, %s", metricText[k.metric], unitText(k.unit))
		if metricText[k.metric] == "" {
			f.YLabel = fmt.Sprintf("%s, %s", k.metric, unitText(k.unit))
		}
		cfgs := make([]string, 0, len(bycfg))
		for c := range bycfg {
			cfgs = append(cfgs, c)
		}
		sort.Slice(cfgs, func(i, j int) bool {
			ri, rj := rank(cfgs[i]), rank(cfgs[j])
			if ri != rj {
				return ri < rj
			}
			return cfgs[i] < cfgs[j]
		})
		for _, c := range cfgs {
			pts := bycfg[c]
			sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
			f.Series = append(f.Series, Series{Label: label(c), Points: pts})
		}
		figs = append(figs, f)
	}
	sort.Slice(figs, func(i, j int) bool { return figs[i].Name < figs[j].Name })
	return figs
}

func name(k key) string {
	n := k.mode
	if k.mode != "p2p" || k.op != "p2p" {
		n += "-" + k.op
	}
	if k.mode != "coll" || k.metric != "time" {
		n += "-" + k.metric
	}
	if !k.xRanks && k.mode != "p2p" {
		n += fmt.Sprintf("-np%d", k.ranks)
	}
	return n + "-" + k.placement
}

func title(k key) string {
	what := k.op
	switch {
	case k.mode == "p2p":
		what = "Point to point, " + metricText[k.metric]
	case k.mode == "nbc":
		what = fmt.Sprintf("%s, %s", k.op, metricText[k.metric])
	}
	if k.xRanks {
		return fmt.Sprintf("%s — %s", what, placement(k.placement))
	}
	return fmt.Sprintf("%s, %d ranks — %s", what, k.ranks, placement(k.placement))
}
