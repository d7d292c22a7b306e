package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestEveryLibraryLocks opens every library of the bench against a
// redis-server of its own and checks that its handles exclude each other,
// that a released lock can be taken again, and that its client's commands
// are counted.
func TestEveryLibraryLocks(t *testing.T) {
	s, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	w, _ := workloadNamed("serial")
	for _, l := range libraries {
		t.Run(l.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			lib, err := l.open(ctx, s, w)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := lib.close(); err != nil {
					t.Error(err)
				}
			}()
			key := "bench:test:" + l.name
			first, second := lib.locker(key), lib.locker(key)
			unlock, err := first.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The deadline only ends the blocked call; its error is what
			// is checked.
			short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err = second.Lock(short)
			cancelShort()
			if err == nil {
				t.Fatal("a second handle took the lock while the first held it")
			}
			if err := unlock(ctx); err != nil {
				t.Fatal(err)
			}
			unlock, err = second.Lock(ctx)
			if err != nil {
				t.Fatalf("lock after the release: %v", err)
			}
			if err := unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if lib.calls() == 0 {
				t.Error("no command of the library's client was counted")
			}
		})
	}
}

// TestSemaphoreOnEveryClient checks that relock takes its semaphore turn
// on every client library, through the same adapter as its Mutex, and
// that the peers take theirs to be reported n/a.
func TestSemaphoreOnEveryClient(t *testing.T) {
	s, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := semaphoreWorkload
	var turns []string
	for _, l := range libraries {
		if takesTurn(l.name, w) {
			turns = append(turns, l.name)
		}
	}
	want := []string{"relock", "relock-rueidis", "relock-valkey", "redsync", "redislock", "rueidislock", "valkeylock"}
	if !slices.Equal(turns, want) {
		t.Fatalf("semaphore turns %v, want %v", turns, want)
	}
	for _, name := range turns {
		open, _ := libraryNamed(name)
		lib, err := open(ctx, s, w)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lockers, err := newLockers(ctx, lib, w, "bench:test:sem:"+name)
		switch {
		case isPeer(name) && !errors.Is(err, errNoSemaphore):
			t.Errorf("%s: %v, want errNoSemaphore", name, err)
		case !isPeer(name) && err != nil:
			t.Errorf("%s: %v", name, err)
		case !isPeer(name):
			unlock, err := lockers[0].Lock(ctx)
			if err == nil {
				err = unlock(ctx)
			}
			if err != nil {
				t.Errorf("%s: acquire and release a permit: %v", name, err)
			}
		}
		if err := lib.close(); err != nil {
			t.Errorf("%s: close: %v", name, err)
		}
	}
}

// TestSameClientPairs checks which ratios the notes below a table add:
// relock on rueidis and on valkey-go against the peers on the same client,
// whatever the workload's reference, and nothing for go-redis, whose
// peers the ratio column already divides.
func TestSameClientPairs(t *testing.T) {
	all := make([]string, len(libraries))
	for i, l := range libraries {
		all[i] = l.name
	}
	want := [][2]string{{"relock-rueidis", "rueidislock"}, {"relock-valkey", "valkeylock"}}
	for _, name := range []string{"serial", "onekey", "readheavy", "semaphore"} {
		w, _ := workloadNamed(name)
		if got := sameClient(w, all); !slices.Equal(got, want) {
			t.Errorf("%s: pairs %v, want %v", name, got, want)
		}
	}
	w, _ := workloadNamed("onekey")
	if got := sameClient(w, []string{"relock", "relock-valkey", "rueidislock"}); len(got) != 0 {
		t.Errorf("pairs %v for a run without a peer on valkey-go, want none", got)
	}
	if got := fmt.Sprint(sameClient(w, []string{"valkeylock", "relock-valkey"})); got != "[[relock-valkey valkeylock]]" {
		t.Errorf("pairs %s, want relock-valkey against valkeylock", got)
	}
}
