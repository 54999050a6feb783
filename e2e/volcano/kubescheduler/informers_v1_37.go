//go:build kube_v1_37

package main

// kube-scheduler v1.37: scheduler.NewInformerFactory takes the informers' name (nil: unnamed);
// its NodeInfoLister gains HavePodsWithRequiredNonHostScopedAntiAffinityList (extender.go has it
// for every release).

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/scheduler"
)

// newInformerFactory is scheduler.NewInformerFactory with no resync and no informer name.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0, nil)
}
