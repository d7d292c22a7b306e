//go:build !linux

package main

import "time"

// delayWaiter waits for a chunk's time with time.Sleep, which an idle
// process may overrun by up to a millisecond; Linux uses a timerfd.
type delayWaiter struct{}

func newDelayWaiter() *delayWaiter { return &delayWaiter{} }

// until returns at t or a little later, or at once if t has passed.
func (w *delayWaiter) until(t time.Time) { time.Sleep(time.Until(t)) }

func (w *delayWaiter) close() {}
