package relock_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/relock-go/relock"
)

func ExampleWithMeterProvider() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader() // a real program exports instead
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks, err := relock.New(rdb, relock.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	lease, err := locks.Mutex("example:metrics").Lock(ctx)
	if err != nil {
		panic(err)
	}
	_ = lease.Unlock(ctx)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "relock.acquisitions" {
				fmt.Println(m.Name, sum.DataPoints[0].Value)
			}
		}
	}
	// Output: relock.acquisitions 1
}
