//go:build kube_v1_34

package main

// kube-scheduler v1.34: NodeInfo is already an interface of k8s.io/kube-scheduler/framework, the
// Extender interface is still kubernetes' own.

import (
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type extender = framework.Extender
type nodeInfo = fwk.NodeInfo
