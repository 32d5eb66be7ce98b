// Package bench compares the acquire+release cost of
// github.com/redislock/redislock/pkg/redislock with other Redis lock
// libraries (bsm/redislock, redsync, rueidislock) and with a raw go-redis
// SET NX + compare-and-delete baseline, all against the same throwaway
// redis-server processes in one run.
//
// It is a separate module so that the comparison libraries stay out of the
// main module's go.mod. Run ./run.sh for benchmarks plus a ratio table.
package bench
