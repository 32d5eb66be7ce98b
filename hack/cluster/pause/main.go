// Command pause sleeps until SIGTERM or SIGINT and then exits 0. hack/cluster
// builds it static into the cluster's pod sandbox (pause) image and into the
// tiny app image the cluster tests run beside the injected agent.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
