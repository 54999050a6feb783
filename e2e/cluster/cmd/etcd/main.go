// etcd as its release builds it: etcdmain.Main is what go.etcd.io/etcd/v3's main package calls.
// Built here from go.etcd.io/etcd/server/v3 at the version k8s.io/kubernetes requires, so the
// API server talks to the etcd its own release is tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
