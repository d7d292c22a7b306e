package gocronlock_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/gocronlock"
)

func ExampleLocker() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	locker, err := gocronlock.NewLocker(locks)
	if err != nil {
		panic(err)
	}

	// Two replicas' schedulers (here in one process) run the same job at
	// the same moment; one of them runs it, the other skips it.
	events := make(chan string, 2)
	for range 2 {
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			panic(err)
		}
		defer func() { _ = s.Shutdown() }()
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
			gocron.NewTask(func() { /* send the report */ }),
			gocron.WithName("example:report"), // the job's lock is "gocron:example:report"
			gocron.WithEventListeners(
				gocron.AfterJobRuns(func(uuid.UUID, string) { events <- "ran" }),
				gocron.AfterLockError(func(uuid.UUID, string, error) { events <- "skipped" })))
		if err != nil {
			panic(err)
		}
		s.Start()
	}
	got := []string{<-events, <-events}
	slices.Sort(got)
	fmt.Println(got)
	// Output: [ran skipped]
}

func ExampleElector() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	// Every replica campaigns; the leader's scheduler runs the jobs.
	election := locks.Election("example:scheduler")
	elector, err := gocronlock.NewElector(election, "10.0.0.7")
	if err != nil {
		panic(err)
	}
	defer elector.Close() // resigns: the next replica leads at once

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		panic(err)
	}
	defer func() { _ = s.Shutdown() }()
	ran := make(chan uint64, 1)
	_, err = s.NewJob(gocron.DurationJob(100*time.Millisecond),
		gocron.NewTask(func() {
			// A job can fence its writes with the leader's term, and stop
			// when leadership is lost with its Context.
			if l := elector.Leadership(); l != nil {
				select {
				case ran <- l.Term():
				default:
				}
			}
		}),
		gocron.WithName("example:cleanup"))
	if err != nil {
		panic(err)
	}
	s.Start() // runs are skipped until this replica leads
	fmt.Println("ran by the leader, in a term:", <-ran > 0)
	// Output: ran by the leader, in a term: true
}
