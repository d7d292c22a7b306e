package main

import (
	"context"
	"errors"
)

// clientSet is a library opened once per worker, so that every worker
// has a client and pool of its own; its calls are the sum of theirs.
type clientSet []library

// openClients opens lib for w: once, or once per worker if w.clients.
func openClients(ctx context.Context, s *server, open opener, w workload) (library, error) {
	if !w.clients {
		return open(ctx, s, w)
	}
	set := make(clientSet, 0, w.workers)
	for range w.workers {
		l, err := open(ctx, s, w)
		if err != nil {
			return nil, errors.Join(err, set.close())
		}
		set = append(set, l)
	}
	return set, nil
}

// forWorker returns the library worker i makes its handle with: its own
// client in a clientSet, the one client otherwise.
func forWorker(lib library, i int) library {
	if set, ok := lib.(clientSet); ok {
		return set[i%len(set)]
	}
	return lib
}

// locker returns a handle on key made by the first client; workers get
// theirs through forWorker.
func (set clientSet) locker(key string) locker { return set[0].locker(key) }

func (set clientSet) calls() int64 {
	var n int64
	for _, l := range set {
		n += l.calls()
	}
	return n
}

func (set clientSet) close() error {
	var errs []error
	for _, l := range set {
		errs = append(errs, l.close())
	}
	return errors.Join(errs...)
}
