// redigo (Debian's golang-github-gomodule-redigo-dev) with FZambia/sentinel
// (golang-github-fzambia-sentinel-dev), wired as that package documents: a
// redis.Pool whose Dial asks Sentinel.MasterAddr() (SENTINEL
// get-master-addr-by-name) and whose TestOnBorrow checks ROLE is master.
// No subscription: a broken connection is dropped and the next dial asks again.
package main

import (
	"errors"
	"time"

	"github.com/FZambia/sentinel"
	"github.com/gomodule/redigo/redis"
)

func main() {
	cfg := loadConfig()
	sntnl := &sentinel.Sentinel{
		Addrs:      cfg.sentinels,
		MasterName: cfg.master,
		Dial: func(addr string) (redis.Conn, error) {
			return redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second),
				redis.DialReadTimeout(time.Second), redis.DialWriteTimeout(time.Second))
		},
	}
	pool := &redis.Pool{
		MaxIdle:     3,
		MaxActive:   64,
		Wait:        true,
		IdleTimeout: 240 * time.Second,
		Dial: func() (redis.Conn, error) {
			addr, err := sntnl.MasterAddr()
			if err != nil {
				return nil, err
			}
			emit("discover", addr)
			return redis.Dial("tcp", addr, redis.DialConnectTimeout(time.Second),
				redis.DialReadTimeout(2*time.Second), redis.DialWriteTimeout(2*time.Second))
		},
		TestOnBorrow: func(c redis.Conn, t time.Time) error {
			if !sentinel.TestRole(c, "master") {
				return errors.New("role check failed")
			}
			return nil
		},
	}
	defer pool.Close()
	run(cfg, func(key string) (int64, error) {
		c := pool.Get()
		defer c.Close()
		if err := c.Send("SET", key, key); err != nil {
			return 0, err
		}
		if err := c.Send("WAIT", 1, 1000); err != nil {
			return 0, err
		}
		if err := c.Flush(); err != nil {
			return 0, err
		}
		if _, err := c.Receive(); err != nil {
			return 0, err
		}
		return redis.Int64(c.Receive())
	})
}
