package door_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/relock-go/relock/internal/door"
	"github.com/relock-go/relock/internal/door/goredis"
)

// TestReplyConversions: the replies of a real server, as the go-redis
// driver hands them over, read as the library reads them; a value of
// another type is an error, never a zero taken for an answer.
func TestReplyConversions(t *testing.T) {
	ctx := context.Background()
	rdb := client(t, srv)
	d := newDoor(t, goredis.New(rdb))
	do := func(args ...any) door.Reply { return d.Command(ctx, door.Cmd{Args: args}) }
	if err := rdb.HSet(ctx, "d:reply:h", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(ctx, "d:reply:l", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}

	if n, err := do("hlen", "d:reply:h").Int64(); err != nil || n != 1 {
		t.Errorf("Int64 of HLEN = %d, %v; want 1", n, err)
	}
	if b, err := do("hexists", "d:reply:h", "f").Bool(); err != nil || !b {
		t.Errorf("Bool of HEXISTS = %v, %v; want true", b, err)
	}
	if b, err := do("hexists", "d:reply:h", "g").Bool(); err != nil || b {
		t.Errorf("Bool of HEXISTS of a missing field = %v, %v; want false", b, err)
	}
	if s, err := do("hget", "d:reply:h", "f").Text(); err != nil || s != "v" {
		t.Errorf("Text of HGET = %q, %v; want v", s, err)
	}
	if _, err := do("hget", "d:reply:h", "g").Text(); !errors.Is(err, door.Nil) {
		t.Errorf("Text of HGET of a missing field: %v, want door.Nil", err)
	}
	if v, err := do("lrange", "d:reply:l", 0, -1).StringSlice(); err != nil || fmt.Sprint(v) != "[a b]" {
		t.Errorf("StringSlice of LRANGE = %v, %v; want [a b]", v, err)
	}
	if v, err := do("eval", "return {1, 2, 3}", 0).Int64Slice(); err != nil || fmt.Sprint(v) != "[1 2 3]" {
		t.Errorf("Int64Slice of a script's table = %v, %v; want [1 2 3]", v, err)
	}
	if m, err := do("config", "get", "maxmemory-policy").StringMap(); err != nil || m["maxmemory-policy"] == "" {
		t.Errorf("StringMap of CONFIG GET = %v, %v; want the policy", m, err)
	}
	if _, err := do("hget", "d:reply:h", "f").Int64(); err == nil {
		t.Error("Int64 of a string that is no number: no error")
	}
	if _, err := do("hlen", "d:reply:h").Slice(); err == nil {
		t.Error("Slice of an integer: no error")
	}
	if _, err := do("lrange", "d:reply:l", 0, -1).Int64Slice(); err == nil {
		t.Error("Int64Slice of strings that are no numbers: no error")
	}
}
