// Command plot draws bench/compare.sh's results as SVG: it reads the
// medians.csv that the summary scripts write (--csv) and writes one plot per
// mode, placement, operation, metric and rank count, log-log against message
// size, one line per configuration. bench/plot.sh runs the summary and
// this on a results folder.
//
// Usage: go run . -in RESULTS/medians.csv -out RESULTS
//
// It is a module of its own so that gompi's users never get the plotting
// library through gompi's go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "medians.csv", "the medians file a summary script wrote with --csv")
	out := flag.String("out", ".", "folder for the SVG files")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := ParseMedians(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	figs := Figures(rows)
	if len(figs) == 0 {
		return fmt.Errorf("%s: no data to plot", in)
	}
	paths, err := WriteAll(figs, out)
	for _, p := range paths {
		fmt.Println(p)
	}
	return err
}
