//go:build tools

// The upstream programs the cluster runs, built from this module's graph (Volcano v1.15.1's, with
// k8s.io/kubernetes at the release Volcano builds against): go mod tidy keeps their modules.
package cluster

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
