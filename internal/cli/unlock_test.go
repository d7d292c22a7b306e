package cli

import (
	"context"
	"strings"
	"testing"
)

func TestUnlockRefusesWithoutForce(t *testing.T) {
	mr, url := server(t)
	c := lockClient(t, mr)
	lock(t, c, "job")
	r := relockCmd(t, "unlock", "--redis", url, "job")
	if r.code != exitUsage {
		t.Fatalf("exit %d, want %d", r.code, exitUsage)
	}
	if !strings.Contains(r.stderr, "--force") {
		t.Errorf("stderr does not mention --force")
	}
	if held, err := c.Mutex("job").IsLocked(context.Background()); err != nil || !held {
		t.Fatalf("IsLocked = %v, %v; want the lock untouched", held, err)
	}
}

func TestUnlockForce(t *testing.T) {
	mr, url := server(t)
	c := lockClient(t, mr)
	l := lock(t, c, "job")
	r := relockCmd(t, "unlock", "--force", "--redis", url, "job")
	if r.code != exitOK || !strings.Contains(r.stdout, "force-unlocked") {
		t.Fatalf("exit %d, stdout %q; want 0 and force-unlocked", r.code, r.stdout)
	}
	if held, err := c.Mutex("job").IsLocked(context.Background()); err != nil || held {
		t.Fatalf("IsLocked = %v, %v; want the lock gone", held, err)
	}
	if err := l.Unlock(context.Background()); err == nil {
		t.Errorf("the holder's Unlock succeeded after a forced unlock")
	}

	r = relockCmd(t, "unlock", "--force", "--redis", url, "job")
	if r.code != exitOK || !strings.Contains(r.stdout, "was not locked") {
		t.Fatalf("second unlock: exit %d, stdout %q; want 0 and was not locked", r.code, r.stdout)
	}
}

func TestUnlockUsage(t *testing.T) {
	r := relockCmd(t, "unlock", "--force")
	if r.code != exitUsage {
		t.Fatalf("exit %d, want %d", r.code, exitUsage)
	}
}
