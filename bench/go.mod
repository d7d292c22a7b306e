module github.com/relock-go/relock/bench

go 1.26.0

require (
	github.com/bsm/redislock v0.10.0
	github.com/go-redsync/redsync/v4 v4.18.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.79
	github.com/relock-go/relock v0.0.0-00010101000000-000000000000
	github.com/relock-go/relock/relockrueidis v0.0.0-00010101000000-000000000000
	github.com/relock-go/relock/relockvalkey v0.0.0-00010101000000-000000000000
	github.com/valkey-io/valkey-go v1.0.79
	golang.org/x/sys v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.41.0 // indirect
	go.opentelemetry.io/otel/metric v1.41.0 // indirect
	go.opentelemetry.io/otel/trace v1.41.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)

replace github.com/relock-go/relock => ../

replace github.com/relock-go/relock/relockrueidis => ../relockrueidis

replace github.com/relock-go/relock/relockvalkey => ../relockvalkey
