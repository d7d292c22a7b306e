package relock

// Release messages published on a lock's channel.
const (
	msgUnlock     = "0"
	msgReadUnlock = "1"
)

// Script arguments boxed once, so that calls do not allocate for them.
var (
	argEmpty any = ""
	argZero  any = "0"
	argOne   any = "1"
)
