package main

import (
	"errors"
	"time"
)

// semaphoreWorkload is 16 workers sharing a semaphore of 4 permits, one
// permit per cycle. Only libraries with a semaphore (semaphores) run it.
var semaphoreWorkload = workload{
	name:    "semaphore",
	title:   "semaphore: 16 workers, 4 permits, 1 per cycle (100µs hold, 500µs think)",
	workers: 16,
	shared:  true,
	hold:    100 * time.Microsecond,
	think:   500 * time.Microsecond,
	permits: 4,
}

// errNoSemaphore is the answer of a library without a semaphore.
var errNoSemaphore = errors.New("no semaphore")
