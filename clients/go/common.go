// The loop every client in clients/ runs (clients/python/common.py describes
// the environment it reads and the lines it prints), for the Go clients.
// Built offline in GOPATH mode against Debian's packaged sources
// (clients/setup.sh --debian): no module proxy.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var outMu sync.Mutex

func emit(kind string, rest string) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, "%s %d %s\n", kind, time.Now().UnixNano()/1e6, strings.ReplaceAll(rest, "\n", " "))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type config struct {
	sentinels []string
	master    string
	prefix    string
	stopFile  string
	deadline  time.Time
	maxWrites int
	pace      time.Duration
}

func loadConfig() config {
	secs, _ := strconv.ParseFloat(envOr("DEADLINE_S", "60"), 64)
	maxWrites, _ := strconv.Atoi(envOr("MAX_WRITES", "20000"))
	pace, _ := strconv.Atoi(envOr("PACE_MS", "5"))
	return config{
		sentinels: strings.Split(os.Getenv("SENTINELS"), ","),
		master:    envOr("MASTER", "mymaster"),
		prefix:    envOr("PREFIX", "clients"),
		stopFile:  os.Getenv("STOP_FILE"),
		deadline:  time.Now().Add(time.Duration(secs * float64(time.Second))),
		maxWrites: maxWrites,
		pace:      time.Duration(pace) * time.Millisecond,
	}
}

// run calls write(key) -> replicas acknowledged, until stopped; on an error it
// waits 50 ms and writes again through the same client.
func run(cfg config, write func(key string) (int64, error)) {
	for i := 0; i < cfg.maxWrites && time.Now().Before(cfg.deadline); i++ {
		if cfg.stopFile != "" && i%10 == 0 {
			if _, err := os.Stat(cfg.stopFile); err == nil {
				return
			}
		}
		key := fmt.Sprintf("%s:%d", cfg.prefix, i)
		n, err := write(key)
		if err != nil {
			emit("err", err.Error())
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if n >= 1 {
			emit("ack", key)
		} else {
			emit("nack", key)
		}
		time.Sleep(cfg.pace)
	}
}
