package relock_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/testkit"
)

// TestClientIdentity: a Client makes itself known in Redis in New
// (host, pid, program, version, start time, WithClientName's name) in a
// hash with a TTL, whose key ends with the uuid of its holds' owner ids,
// and deletes it on Close.
func TestClientIdentity(t *testing.T) {
	testkit.ForEach(t, func(t *testing.T, top testkit.Topology) {
		rdb := top.RDB(t)
		ctx := testkit.CtxTimeout(t, 10*time.Second)
		label := "identity-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		c, err := relock.New(rdb, relock.WithClientName(label))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.Mutex(testkit.LockName(t)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		owner, err := rdb.HKeys(ctx, l.Name()).Result()
		if err != nil {
			t.Fatal(err)
		}
		var uuid string
		for _, f := range owner {
			if id, _, ok := strings.Cut(f, ":"); ok && f != layout.TokenField && f != layout.SinceField {
				uuid = id
			}
		}
		key := layout.ClientKey(uuid)
		info, err := rdb.HGetAll(ctx, key).Result() // written by New
		if err != nil || len(info) == 0 {
			t.Fatalf("identity hash %s: %v, %v", key, info, err)
		}
		host, _ := os.Hostname()
		want := map[string]string{"host": host, "pid": strconv.Itoa(os.Getpid()), "program": filepath.Base(os.Args[0]), "name": label}
		for f, v := range want {
			if info[f] != v {
				t.Errorf("%s = %q, want %q", f, info[f], v)
			}
		}
		if _, err := time.Parse(time.RFC3339, info["started"]); err != nil {
			t.Errorf("started %q: %v", info["started"], err)
		}
		if info["version"] == "" || info["version"] != relock.Version() {
			t.Errorf("version %q, want %q", info["version"], relock.Version())
		}
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 2*relock.DefaultWatchdogTimeout {
			t.Errorf("TTL %v, want at most twice the watchdog timeout", ttl)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("identity hash after Close: %v, want none", err)
		}
	})
}

// TestClientNameTooLong: WithClientName refuses a name over 200 bytes.
func TestClientNameTooLong(t *testing.T) {
	rdb := testkit.Standalone.Client()
	defer rdb.Close()
	_, err := relock.New(rdb, relock.WithClientName(strings.Repeat("x", 201)))
	if !errors.Is(err, relock.ErrInvalidOption) {
		t.Fatalf("New with a 201-byte name: %v, want ErrInvalidOption", err)
	}
}
