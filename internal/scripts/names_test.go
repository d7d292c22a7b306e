package scripts

import (
	"regexp"
	"strings"
	"testing"

	"github.com/relock-go/relock/internal/layout"
)

// TestNoNames: no script or library spells the name or prefix of a key or
// channel: every key comes among a script's KEYS and every prefix it
// extends as an argument, both made by internal/layout. The only names of
// the layout a script spells are the hash fields relock adds to a lock,
// and those are layout's.
func TestNoNames(t *testing.T) {
	fields := map[string]bool{
		layout.TokenField: true, layout.SinceField: true, layout.QueuedField: true,
		layout.LeaderField: true, layout.LeaderHolderField: true,
	}
	spelled := make(map[string]bool)
	literal := regexp.MustCompile(`'([^'\n]*)'|"([^"\n]*)"`)
	entries, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, err := files.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(uncommented(string(src)), -1) {
			s := m[1] + m[2]
			switch {
			case fields[s]:
				spelled[s] = true
			case strings.Contains(s, layout.Own), strings.Contains(s, "redisson"),
				strings.Contains(s, strings.Trim(layout.ReaderHoldInfix, ":")), strings.Contains(s, ":{"):
				t.Errorf("%s spells %q", e.Name(), s)
			}
		}
	}
	for f := range fields {
		if !spelled[f] {
			t.Errorf("no script spells the field %q", f)
		}
	}
}
