package cli

import (
	"context"
	"maps"
	"strings"
	"testing"
)

// TestUnlockForceLeavesWhatIsNotALock: unlock --force on a key show calls
// not a lock (an application's hash, a semaphore's count) exits as show
// does and deletes nothing.
func TestUnlockForceLeavesWhatIsNotALock(t *testing.T) {
	srv, url := realServer(t)
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	user := map[string]string{"name": "x", "email": "y"}
	if err := rdb.HSet(ctx, "user:42", user).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "permits", "3", 0).Err(); err != nil {
		t.Fatal(err)
	}

	show := relockCmd(t, "show", "--redis", url, "user:42")
	if !strings.Contains(show.stdout, "not a lock") {
		t.Fatalf("show says %q, want not a lock", show.stdout)
	}
	for _, name := range []string{"user:42", "permits"} {
		r := relockCmd(t, "unlock", "--force", "--redis", url, name)
		if r.code != show.code || strings.Contains(r.stdout, "force-unlocked") || !strings.Contains(r.stderr, "not a lock") {
			t.Errorf("unlock --force %s: exit %d, stdout %q, stderr %q; want show's exit %d, refused as not a lock",
				name, r.code, r.stdout, r.stderr, show.code)
		}
	}
	if got := rdb.HGetAll(ctx, "user:42").Val(); !maps.Equal(got, user) {
		t.Errorf("user:42 holds %v after unlock --force, want %v", got, user)
	}
	if got := rdb.Get(ctx, "permits").Val(); got != "3" {
		t.Errorf("permits holds %q after unlock --force, want 3", got)
	}
}
