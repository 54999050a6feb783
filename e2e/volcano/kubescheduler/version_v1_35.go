//go:build !kube_v1_34 && !kube_v1_30

package main

// kube-scheduler v1.35 and later: the Extender and NodeInfo types live in
// k8s.io/kube-scheduler/framework.

import fwk "k8s.io/kube-scheduler/framework"

type extender = fwk.Extender
type nodeInfo = fwk.NodeInfo
