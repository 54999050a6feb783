#!/usr/bin/env bash
# Copy the repository's policies into the kustomize tree (kustomize only reads files under the
# kustomization's own directory). tests/ops/test_manifests.py fails when the copies drift.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rm -f "$here"/policies/*.policy
cp "$here"/../../policies/*.policy "$here"/policies/
cd "$here/../.." && python -m policy_extender check docker/k8s/policies
