// Package gocronlock runs the jobs of gocron v2 schedulers on several
// replicas once, not once per replica, with relock's locks on Redis.
//
// Two ways, as gocron offers them:
//
//   - Locker (gocron.WithDistributedLocker): every scheduler runs, and each
//     run of a job takes the job's lock first; a tick runs on the scheduler
//     that comes to it first. The watchdog keeps the lock while the job
//     runs, and a run keeps it at least a skew long, so that a scheduler
//     whose clock is a little late does not run the same tick again.
//   - Elector (gocron.WithDistributedElector): the schedulers elect a
//     leader with a relock Election, and the leader runs every job. A
//     leadership lost is seen at once; a dead leader is replaced within
//     its watchdog timeout.
//
// Locker and Elector say what they guarantee and what not. The package is
// a module of its own, github.com/relock-go/relock/gocronlock, so that
// relock's users who do not use gocron do not download it.
package gocronlock
