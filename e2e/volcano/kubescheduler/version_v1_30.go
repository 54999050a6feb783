//go:build kube_v1_30

package main

// kube-scheduler v1.30: NodeInfo is a struct of kubernetes' scheduler framework.

import (
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type extender = framework.Extender
type nodeInfo = *framework.NodeInfo
