// Package bench compares the acquire+release cost of
// github.com/redislock/redislock/pkg/redislock with other Redis lock
// libraries (bsm/redislock, redsync, rueidislock) and with a raw go-redis
// SET NX + compare-and-delete baseline, all against the same throwaway
// redis-server processes in one run, and Redlock's cost against the number
// of nodes.
//
// It is a separate module so that the comparison libraries, and the
// plotting library of cmd/benchreport, stay out of the main module's
// go.mod. ./run.sh (`make bench`) runs these benchmarks and those of
// test/e2e, and writes a report with cmd/benchreport.
package bench
