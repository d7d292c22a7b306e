package relockvalkey

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write this package's files from relockrueidis's")

// fromRueidis turns a file of relockrueidis into this package's: valkey-go
// is rueidis's fork with the same API under other names.
var fromRueidis = strings.NewReplacer(
	`"github.com/redis/rueidis"`, `valkey "github.com/valkey-io/valkey-go"`,
	"relockrueidis", "relockvalkey",
	"rueidis.", "valkey.",
	"RedisMessage", "ValkeyMessage",
	"RedisResult", "ValkeyResult",
	"RedisError", "ValkeyError",
	"rueidis", "valkey-go",
	"Rueidis", "Valkey",
)

// TestSameAsRueidisAdapter: every file of this package but its package doc
// (relockvalkey.go) is relockrueidis's with the names swapped, so that a
// change to one adapter is made to both. go test -run
// TestSameAsRueidisAdapter -update writes them from relockrueidis's.
func TestSameAsRueidisAdapter(t *testing.T) {
	files, err := filepath.Glob("../relockrueidis/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("relockrueidis's files: %v %v", files, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "relockrueidis.go" {
			continue // the package doc, which names its sibling
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := fromRueidis.Replace(string(src))
		if *update {
			if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (relockrueidis has it)", name, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s differs from relockrueidis's with the names swapped; run go test -run TestSameAsRueidisAdapter -update after changing relockrueidis", name)
		}
	}
}
