module github.com/relock-go/relock/gocronlock

go 1.24.0

replace github.com/relock-go/relock => ../

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/google/uuid v1.6.0
	github.com/jonboulle/clockwork v0.5.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/relock-go/relock v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.opentelemetry.io/otel v1.41.0 // indirect
	go.opentelemetry.io/otel/metric v1.41.0 // indirect
	go.opentelemetry.io/otel/trace v1.41.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
