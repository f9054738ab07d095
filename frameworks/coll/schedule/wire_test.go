package schedule

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/colltest"
)

const wireDoc = "../../../docs/plugin-wire.md"

func readWireDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(wireDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docExample is the worked example of docs/plugin-wire.md: rank 0's part
// of an allreduce on 2 ranks. docExampleMirror is rank 1's, which the doc
// describes in words only.
func docExample() *Schedule {
	return &Schedule{Op: coll.Allreduce, Size: 2, Rank: 0, Parts: 2, Rounds: [][]Step{
		{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: 2}},
		{
			{Kind: Send, Peer: 1, Src: Output, First: 1, End: 2},
			{Kind: Recv, Peer: 1, Dst: Scratch, First: 0, End: 1},
			{Kind: Reduce, Src: Output, Dst: Scratch, First: 0, End: 1},
			{Kind: Copy, Src: Scratch, Dst: Output, First: 0, End: 1},
		},
		{
			{Kind: Send, Peer: 1, Src: Output, First: 0, End: 1},
			{Kind: Recv, Peer: 1, Dst: Output, First: 1, End: 2},
		},
	}}
}

func docExampleMirror() *Schedule {
	return &Schedule{Op: coll.Allreduce, Size: 2, Rank: 1, Parts: 2, Rounds: [][]Step{
		{{Kind: Copy, Src: Input, Dst: Output, First: 0, End: 2}},
		{
			{Kind: Send, Peer: 0, Src: Output, First: 0, End: 1},
			{Kind: Recv, Peer: 0, Dst: Scratch, First: 1, End: 2},
			{Kind: Reduce, Src: Scratch, Dst: Output, First: 1, End: 2},
		},
		{
			{Kind: Send, Peer: 0, Src: Output, First: 1, End: 2},
			{Kind: Recv, Peer: 0, Dst: Output, First: 0, End: 1},
		},
	}}
}

// docHex reads the annotated dump that follows the marker: on each line,
// the bytes in hex up to the first double space, then a comment.
func docHex(t *testing.T, doc, marker string) []byte {
	t.Helper()
	_, after, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("%s has no %q", wireDoc, marker)
	}
	sc := bufio.NewScanner(strings.NewReader(after))
	var out []byte
	fence := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if fence++; fence == 2 {
				return out
			}
			continue
		}
		if fence == 0 {
			continue
		}
		bytesPart, _, _ := strings.Cut(line, "  ")
		b, err := hex.DecodeString(strings.ReplaceAll(bytesPart, " ", ""))
		if err != nil {
			t.Fatalf("%s, worked example: line %q: %v", wireDoc, line, err)
		}
		out = append(out, b...)
	}
	t.Fatalf("%s: the worked example's code block does not end", wireDoc)
	return nil
}

// The worked example of docs/plugin-wire.md is what Encode writes for the
// schedule it describes, decodes back to it, validates, and is a correct
// allreduce (with its mirror on rank 1) for non-commutative operations
// too, as the doc says.
func TestWireDocExample(t *testing.T) {
	doc := readWireDoc(t)
	want := docExample()
	got := docHex(t, doc, "<!-- worked example: TestWireDocExample -->")
	if enc := want.Encode(); string(got) != string(enc) {
		t.Fatalf("the doc's example is\n% x\nEncode writes\n% x", got, enc)
	}
	if n := fmt.Sprintf("In binary form, %d bytes", len(got)); !strings.Contains(doc, n) {
		t.Errorf("the doc does not say %q", n)
	}
	s, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Decode of the doc's bytes: %+v, want %+v", s, want)
	}
	if err := s.Validate(coll.Allreduce, 2, 0); err != nil {
		t.Error(err)
	}
	if err := docExampleMirror().Validate(coll.Allreduce, 2, 1); err != nil {
		t.Error(err)
	}
	colltest.Conformance(t, coll.Allreduce, scheduled(coll.Allreduce, func(n, me int) *Schedule {
		if me == 0 {
			return docExample()
		}
		return docExampleMirror()
	}), colltest.Options{Sizes: []int{2}})
}

// The doc's tables give the numbers the encoder writes: every operation,
// kind and buffer, and the limits Decode and Validate apply.
func TestWireDocTables(t *testing.T) {
	doc := readWireDoc(t)
	var want []string
	for _, op := range coll.Ops() {
		want = append(want, fmt.Sprintf("| %d | `%s` |", op, op))
	}
	for k := Send; k < numKinds; k++ {
		want = append(want, fmt.Sprintf("| %d | `%s` |", k, k))
	}
	for b, name := range map[Buffer]string{None: "None", Input: "Input", Output: "Output", Scratch: "Scratch"} {
		want = append(want, fmt.Sprintf("| %d | `%s` |", b, name))
	}
	want = append(want,
		fmt.Sprintf("an operation number of %d or more", coll.NumOps),
		fmt.Sprintf("| 0 | 4 | magic: `%c` `%c` `%c` `%c` (`% x`) |", magic[0], magic[1], magic[2], magic[3], magic[:]),
		fmt.Sprintf("steps, %d bytes each", stepBytes),
		fmt.Sprintf("| `schedule.MaxParts` | %d |", MaxParts),
		fmt.Sprintf("| `schedule.MaxRounds` | %d |", MaxRounds),
		fmt.Sprintf("| `schedule.MaxSteps` | %d |", MaxSteps),
		fmt.Sprintf("a `kind` is not %d to %d, or a `src` or `dst` not 0 to %d", Send, numKinds-1, numBuffers-1),
	)
	// The operations that take schedules and those refused, grouped by
	// the reason Fillable gives.
	var taken []string
	refused := map[string][]string{}
	var reasons []string
	for _, op := range coll.Ops() {
		name := "`" + op.String() + "`"
		err := Fillable(op)
		if err == nil {
			taken = append(taken, name)
			continue
		}
		_, why, _ := strings.Cut(err.Error(), op.String()+": ")
		why, _, _ = strings.Cut(why, ", which")
		if refused[why] == nil {
			reasons = append(reasons, why)
		}
		refused[why] = append(refused[why], name)
	}
	want = append(want, "| "+strings.Join(taken, ", ")+" | taken |")
	for _, why := range reasons {
		want = append(want, "| "+strings.Join(refused[why], ", ")+" | refused: "+why+" |")
	}
	flat := strings.Join(strings.Fields(doc), " ") // prose wraps anywhere
	for _, w := range want {
		if !strings.Contains(flat, w) {
			t.Errorf("%s does not say %q", wireDoc, w)
		}
	}
	if numBuffers != 4 {
		t.Errorf("%d buffers; the doc's table has 4", numBuffers)
	}
}
