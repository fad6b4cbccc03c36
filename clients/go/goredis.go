// go-redis v5 (Debian's golang-gopkg-redis.v5-dev): redis.NewFailoverClient.
// It asks a sentinel (SENTINEL get-master-addr-by-name) whenever its pool dials,
// and subscribes to +switch-master on the sentinel it used, closing pooled
// connections to the old primary when told. Its log lines show which happened:
// they are turned into `discover` and `switch` lines here.
package main

import (
	"log"
	"strings"
	"time"

	"gopkg.in/redis.v5"
)

type logLines struct{}

func (logLines) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, "sentinel: new "):
		emit("switch", line[strings.LastIndex(line, " ")+1:])
	case strings.Contains(line, " addr is "):
		emit("discover", line[strings.LastIndex(line, " ")+1:])
	}
	return len(p), nil
}

func main() {
	cfg := loadConfig()
	redis.SetLogger(log.New(logLines{}, "", 0))
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    cfg.master,
		SentinelAddrs: cfg.sentinels,
		DialTimeout:   time.Second,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
	})
	defer client.Close()
	run(cfg, func(key string) (int64, error) {
		pipe := client.Pipeline()
		defer pipe.Close()
		pipe.Set(key, key, 0)
		wait := redis.NewIntCmd("WAIT", 1, 1000)
		pipe.Process(wait)
		if _, err := pipe.Exec(); err != nil {
			return 0, err
		}
		return wait.Val(), nil
	})
}
