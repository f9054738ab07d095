package params

import (
	"strings"
	"testing"
)

// An error about a long line quotes its start, not the whole line: a binary
// file named as a parameter file makes a readable message.
func TestConfErrorsQuoteLittle(t *testing.T) {
	long := strings.Repeat("X", 1<<20)
	for _, data := range []string{long, long + " = 1", "a = 'b' " + long} {
		_, err := ParseConfFile("f.conf", []byte(data))
		if err == nil {
			t.Fatalf("%.20q...: no error", data)
		}
		if len(err.Error()) > 400 || !strings.Contains(err.Error(), "more bytes") {
			t.Errorf("%.20q...: %d-byte message %.200q", data, len(err.Error()), err)
		}
	}
}
