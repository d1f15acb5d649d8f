// Command etcd is etcd's own server entry point, built from the etcd version that
// k8s.io/kubernetes pins, so the local control plane needs no etcd release download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
