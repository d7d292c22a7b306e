package scripts

// The read-write lock's scripts (Redisson's RReadWriteLock layout). Each
// file's header names its KEYS, ARGV and return values.
var (
	RWReadLock    = loadWith("rw_read_lock", "clock", "fence", "queue", "lockhash", "rw_wait")
	RWWriteLock   = loadWith("rw_write_lock", "clock", "fence", "queue", "lockhash", "rw_wait")
	RWReadUnlock  = loadWith("rw_read_unlock", "clock", "fence", "queue", "rw_readers", "rw_queue", "rw_release")
	RWWriteUnlock = loadWith("rw_write_unlock", "clock", "fence", "queue", "rw_readers", "rw_queue", "rw_release")
	RWRenew       = load("rw_renew")
	RWForceUnlock = loadWith("rw_forceunlock", "clock", "fence", "queue", "rw_readers", "lockhash")
)
