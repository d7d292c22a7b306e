package relockrueidis_test

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/testkit"
	"github.com/relock-go/relock/relockrueidis"
)

func ExampleNew() {
	ctx := context.Background()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testkit.Standalone.Addr}})
	if err != nil {
		panic(err)
	}
	defer c.Close() // after locks.Close: relock never closes the client
	locks, err := relockrueidis.New(c)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	lease, err := locks.Mutex("example:invoice:42").Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("charging the card once")
	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output: charging the card once
}
