// pause: the pod sandbox's first process for scripts/test-cluster's node, which reaches
// no image registry. As Kubernetes' build/pause/linux/pause.c: it waits for SIGINT or
// SIGTERM and reaps the children a shared process namespace hands it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
