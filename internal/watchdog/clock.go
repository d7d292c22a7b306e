package watchdog

import "time"

// Time returns the moment t of the watchdog's clock (see Now) as a
// time.Time carrying a monotonic reading, so that time.Until of it follows
// the same clock as the deadlines.
func (w *Watchdog) Time(t int64) time.Time { return w.base.Add(time.Duration(t)) }
