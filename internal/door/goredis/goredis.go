// Package goredis puts a go-redis v9 client behind relock's door: it is
// the only package of the library that speaks go-redis.
package goredis

import "github.com/redis/go-redis/v9"

// Driver is a go-redis client as a driver of the door. The door never
// closes the client.
type Driver struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient // c, when it is a cluster client; else nil
}

// New returns c as a driver.
func New(c redis.UniversalClient) *Driver {
	d := &Driver{c: c}
	d.cluster, _ = c.(*redis.ClusterClient)
	return d
}
